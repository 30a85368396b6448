"""A minimal LanceNamespace that records how it is built and closed.

For tests of code that is generic over implementations (the Spark client cache, ``impl``
resolution): it is a real implementation of the interface, reached by its class path
``support.recording_namespace.RecordingNamespace``, never a stand-in for one of ours.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

from lance_namespace import LanceNamespace

BUILT: weakref.WeakSet[RecordingNamespace] = weakref.WeakSet()  # holds none alive
_LOCK = threading.Lock()


class RecordingNamespace(LanceNamespace):
    def __init__(self, **properties: Any) -> None:
        self.properties = dict(properties)
        self.closed = False
        with _LOCK:
            BUILT.add(self)

    def namespace_id(self) -> str:
        return f"RecordingNamespace({sorted(self.properties)})"

    def close(self) -> None:
        self.closed = True
