"""What makes the server safe to put on a network: bearer-token auth, a body limit, an audit log.

Each is a plain ASGI middleware (no per-request task or copy of the body), so the cost per call
stays in microseconds. None of them ever writes a secret: the token is compared in constant
time and never logged; the audit line names who (``token`` or ``anonymous``), not with what.
"""

from __future__ import annotations

import hmac
import json
import logging
import os
import stat
import time
from collections.abc import Awaitable, Callable, MutableMapping
from datetime import datetime, timezone
from typing import Any

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
    """The bearer token in ``path`` (surrounding white space removed).

    Refuses an empty file and one that another user could change (writable by group or
    others, or owned by someone else but root): whoever writes it chooses the server's
    token. A file others can read is accepted with a warning (to ``warn``, else the log).
    """
    with open(path, encoding="utf-8") as handle:
        info = os.fstat(handle.fileno())
        if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH) or info.st_uid not in (os.getuid(), 0):
            raise ValueError(
                f"The auth token file {path} can be changed by other users "
                f"(mode {stat.S_IMODE(info.st_mode):04o}, owner uid {info.st_uid}): "
                f"make it yours and writable only by you (chmod 600 {path})"
            )
        token = handle.read().strip()
    if not token:
        raise ValueError(f"The auth token file {path} is empty")
    if info.st_mode & (stat.S_IRGRP | stat.S_IROTH):
        message = (
            f"The auth token file {path} is readable by other users "
            f"(mode {stat.S_IMODE(info.st_mode):04o}): chmod 600 {path}"
        )
        (warn or logging.getLogger("lance_metastore.rest").warning)(message)
    return token


class BearerAuthMiddleware:
    """Requires ``Authorization: Bearer <token>`` when a token is configured (else 401, code 16)."""

    def __init__(self, app: ASGIApp, token: str | None, open_paths: set[str]) -> None:
        self.app = app
        self.token = token.encode() if token else None
        self.open_paths = open_paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.token is None:
            note(scope, identity="anonymous")
        elif scope["path"] not in self.open_paths:
            presented = _bearer(scope)
            # compare_digest on bytes of any length: constant time in the token's content
            if presented is None or not hmac.compare_digest(presented, self.token):
                note(scope, identity="anonymous", code=16)
                await _send_error(
                    send,
                    401,
                    16,
                    "Missing or invalid bearer token",
                    **{"www-authenticate": 'Bearer realm="lance-metastore"'},
                )
                return
            note(scope, identity="token")
        else:
            note(scope, identity="anonymous")
        await self.app(scope, receive, send)


def _bearer(scope: Scope) -> bytes | None:
    for name, value in scope["headers"]:
        if name == b"authorization":
            scheme, _, credentials = value.partition(b" ")
            if scheme.lower() == b"bearer" and credentials.strip():
                token: bytes = credentials.strip()
                return token
            return None
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
    """One log line per request: time, client, identity, operation, object id, status, code,
    duration. Object ids are escaped so a crafted id cannot forge a line."""

    def __init__(self, app: ASGIApp, logger: logging.Logger | None = None) -> None:
        self.app = app
        self.logger = logger or logging.getLogger(AUDIT_LOGGER)

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
        self.logger.info(
            "time=%s client=%s identity=%s op=%s id=%s status=%d code=%s ms=%.2f",
            datetime.now(timezone.utc).isoformat(timespec="milliseconds"),
            f"{client[0]}:{client[1]}" if client else "-",
            facts.get("identity", "anonymous"),
            facts.get("operation") or _escape(f"{scope['method']} {scope['path']}"),
            _escape(facts["object_id"]) if facts.get("object_id") is not None else "-",
            status,
            "-" if code is None else code,
            seconds * 1000,
        )


def _escape(text: str) -> str:
    """Printable ASCII stays, anything else (newlines, controls, non-ASCII) is escaped."""
    text = text[:512]
    if text.isascii() and text.isprintable() and " " not in text:
        return text
    return json.dumps(text)
