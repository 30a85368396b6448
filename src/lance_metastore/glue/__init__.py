"""The AWS Glue Data Catalog backend: :class:`GlueNamespace` and its AWS session code."""

from __future__ import annotations

from .namespace import GlueNamespace

__all__ = ["GlueNamespace"]
