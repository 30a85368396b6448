"""Accept every shape a request arrives in, in one place.

pylance's Python code passes the model objects of ``lance_namespace``; Lance's Rust core (and
so lancedb) passes a ``dict`` subclass with ``model_dump()``; people pass plain dicts, ``None``
for "no arguments", or a ``$``-joined string as the id. All of them become the model.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeAlias, TypeVar

from lance_namespace.errors import InvalidInputError
from pydantic import BaseModel, ValidationError

from .identifiers import split_identifier

M = TypeVar("M", bound=BaseModel)

# A request as callers pass it (the model, a dict, None, ...): any object, which
# :func:`coerce_request` turns into the model or refuses.
RequestInput: TypeAlias = object

# Request modes, as the spec spells them; matched case-insensitively, "_" optional.
CREATE, EXIST_OK, OVERWRITE = "create", "exist_ok", "overwrite"
FAIL, SKIP = "fail", "skip"
RESTRICT, CASCADE = "restrict", "cascade"
APPEND = "append"


def coerce_request(request: RequestInput, model: type[M]) -> M:
    """Return ``request`` as an instance of ``model``, or raise InvalidInputError (13)."""
    if isinstance(request, model):
        return request
    if request is None:
        data: dict[str, Any] = {}
    elif isinstance(request, dict):
        data = dict(request)
    elif hasattr(request, "model_dump"):
        data = request.model_dump()
    else:
        raise InvalidInputError(f"{model.__name__} expected, got {type(request).__name__}")
    raw_id = data.get("id")
    if isinstance(raw_id, str):
        data["id"] = list(split_identifier(raw_id))
    elif raw_id is not None and not isinstance(raw_id, (list, tuple)):
        # pydantic would take any iterable as a list: a set's parts have no order, so no path.
        raise InvalidInputError(
            f"{model.__name__}: id must be a list of names or a '$'-joined string, "
            f"got {type(raw_id).__name__}"
        )
    data = {key: value for key, value in data.items() if value is not None}
    try:
        return model.model_validate(data)
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'request'}: {e['msg']}" for e in error.errors()
        )
        raise InvalidInputError(f"Invalid {model.__name__}: {problems}") from None


def request_id(request: RequestInput) -> object:
    """The raw ``id`` of a request in any shape, for naming it before it is validated."""
    if request is None:
        return None
    if isinstance(request, dict):
        return request.get("id")
    return getattr(request, "id", None)


def request_mode(value: str | None, default: str, allowed: Sequence[str], what: str) -> str:
    """A request's mode as one of ``allowed`` (lower case), or InvalidInputError."""
    if value is None or value == "":
        return default
    normalized = value.strip().lower().replace("-", "_")
    if normalized == "existok":
        normalized = EXIST_OK
    if normalized not in allowed:
        raise InvalidInputError(
            f"Invalid {what} {value!r}: expected one of {', '.join(m.upper() for m in allowed)}"
        )
    return normalized
