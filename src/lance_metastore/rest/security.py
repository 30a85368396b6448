"""What makes the server safe to put on a network: authentication, a body limit, an audit log.

Each is a plain ASGI middleware (no per-request task or copy of the body), so the cost per call
stays in microseconds. None of them ever writes a secret: credentials are checked by the
schemes of ``auth.py`` and never logged; the audit line names who (the principal, or
``anonymous``), not with what.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable, MutableMapping
from datetime import datetime, timezone
from typing import Any

from .access import ANONYMOUS, AccessControl
from .auth import InvalidCredentials, Principal, read_private_file

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

DEFAULT_MAX_BODY_BYTES = 256 * 1024 * 1024  # Arrow IPC bodies of data operations included
AUDIT_LOGGER = "lance_metastore.rest.audit"
_AUDIT_KEY = "lance_metastore.audit"


def note(scope: Scope, **facts: Any) -> None:
    """Record facts about the request (operation, object id, error code) for its audit line."""
    scope.setdefault(_AUDIT_KEY, {}).update(facts)


def noted(scope: Scope, key: str) -> Any:
    """A fact recorded by :func:`note` (None when it was not)."""
    return scope.get(_AUDIT_KEY, {}).get(key)


async def _send_error(send: Send, status: int, code: int, message: str, **headers: str) -> None:
    body = json.dumps({"error": message, "code": code}).encode()
    raw_headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        *((name.encode(), value.encode()) for name, value in headers.items()),
    ]
    await send({"type": "http.response.start", "status": status, "headers": raw_headers})
    await send({"type": "http.response.body", "body": body})


def read_token_file(path: str, warn: Callable[[str], None] | None = None) -> str:
    """The bearer token in ``path`` (surrounding white space removed); refused when others can
    change the file, accepted with a warning when others can read it (see
    :func:`~lance_metastore.rest.auth.read_private_file`)."""
    return read_private_file(path, "auth token file", warn)


PRINCIPAL_KEY = "lance_metastore.principal"


def principal_of(scope: Scope) -> Principal:
    """The caller :class:`AuthenticationMiddleware` admitted for this request."""
    principal: Principal = scope.get(PRINCIPAL_KEY, ANONYMOUS)
    return principal


class AuthenticationMiddleware:
    """Admits a request when one of the server's schemes proves its caller (else 401, code 16),
    and records the caller for the route's privilege check and the audit line."""

    def __init__(self, app: ASGIApp, access: AccessControl, open_paths: set[str]) -> None:
        self.app = app
        self.access = access
        self.open_paths = open_paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.access.authenticates and scope["path"] not in self.open_paths:
            repeated = _repeated_credential_header(scope["headers"])
            if repeated is not None:
                # Which of two credentials would count differs between proxies and servers:
                # refuse rather than pick one.
                note(scope, identity="anonymous", code=13)
                await _send_error(
                    send, 400, 13, f"The request carries more than one {repeated} header"
                )
                return
            try:
                principal = await self.access.authenticate(dict(scope["headers"]))
            except InvalidCredentials as error:
                note(scope, identity="anonymous", code=16)
                await _send_error(
                    send,
                    401,
                    16,
                    str(error),
                    **{"www-authenticate": 'Bearer realm="lance-metastore"'},
                )
                return
        else:
            principal = ANONYMOUS
        scope[PRINCIPAL_KEY] = principal
        note(scope, identity=principal.qualified)
        await self.app(scope, receive, send)


_CREDENTIAL_HEADERS = {b"authorization": "Authorization", b"x-api-key": "x-api-key"}


def _repeated_credential_header(headers: list[tuple[bytes, bytes]]) -> str | None:
    """The name of a credential header the request carries more than once, if any."""
    seen: set[bytes] = set()
    for name, _ in headers:
        lowered = name.lower()
        if lowered in _CREDENTIAL_HEADERS:
            if lowered in seen:
                return _CREDENTIAL_HEADERS[lowered]
            seen.add(lowered)
    return None


class BodyTooLarge(Exception):
    """A request body went past the server's limit (413, code 13)."""


class BodyLimitMiddleware:
    """Refuses bodies over ``max_bytes``: at once by Content-Length, or as they stream in."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        message = f"The request body is larger than the server's limit of {self.max_bytes} bytes"
        for name, value in scope["headers"]:
            if name == b"content-length":
                try:
                    too_large = int(value) > self.max_bytes
                except ValueError:
                    too_large = False  # the HTTP layer refuses a malformed length itself
                if too_large:
                    note(scope, code=13)
                    await _send_error(send, 413, 13, message)
                    return
        received = 0

        async def limited_receive() -> Message:
            nonlocal received
            incoming = await receive()
            if incoming["type"] == "http.request":
                received += len(incoming.get("body", b""))
                if received > self.max_bytes:
                    raise BodyTooLarge(message)
            return incoming

        await self.app(scope, limited_receive, send)


class AuditMiddleware:
    """One log line per request: time, client, identity (the principal), operation, object id,
    status, code, duration, and ``denied=<privilege>`` when the policy refused it. Ids and
    names are escaped so a crafted one cannot forge a line."""

    def __init__(
        self, app: ASGIApp, logger: logging.Logger | None = None, json_lines: bool = False
    ) -> None:
        self.app = app
        self.logger = logger or logging.getLogger(AUDIT_LOGGER)
        self.json_lines = json_lines  # one JSON object per line, the same fields

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500
        logged = False

        def log() -> None:
            nonlocal logged
            logged = True
            if self.logger.isEnabledFor(logging.INFO):
                self._log(scope, status, time.perf_counter() - started)

        async def recording_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body" and not message.get("more_body"):
                log()  # before the last byte leaves: a client never sees an answer unaudited
            await send(message)

        try:
            await self.app(scope, receive, recording_send)
        finally:
            if not logged:
                log()

    def _log(self, scope: Scope, status: int, seconds: float) -> None:
        facts = scope.get(_AUDIT_KEY, {})
        client = scope.get("client")
        code = facts.get("code")
        denied = facts.get("denied")
        when = datetime.now(timezone.utc).isoformat(timespec="milliseconds")
        address = f"{client[0]}:{client[1]}" if client else "-"
        operation = facts.get("operation")
        object_id = facts.get("object_id")
        if self.json_lines:  # json.dumps escapes what could forge a line
            line = {
                "time": when,
                "client": address,
                "identity": str(facts.get("identity", "anonymous"))[:512],
                "op": operation or f"{scope['method']} {scope['path'][:512]}",
                "id": None if object_id is None else str(object_id)[:512],
                "status": status,
                "code": code,
                "ms": round(seconds * 1000, 2),
                **({"denied": denied} if denied else {}),
            }
            self.logger.info("%s", json.dumps(line))
            return
        self.logger.info(
            "time=%s client=%s identity=%s op=%s id=%s status=%d code=%s ms=%.2f%s",
            when,
            address,
            _escape(facts.get("identity", "anonymous")),
            operation or _escape(f"{scope['method']} {scope['path']}"),
            _escape(object_id) if object_id is not None else "-",
            status,
            "-" if code is None else code,
            seconds * 1000,
            f" denied={denied}" if denied else "",
        )


def _escape(text: str) -> str:
    """Printable ASCII stays, anything else (newlines, controls, non-ASCII) is escaped."""
    text = text[:512]
    if text.isascii() and text.isprintable() and " " not in text:
        return text
    return json.dumps(text)
