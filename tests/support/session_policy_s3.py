"""Session-policy S3 emulator: moto's server enforces no AssumeRole session policy; this proxy does.

AWS documents that a request made with temporary credentials from ``AssumeRole`` is allowed
only where both the role's policies and the session policy passed to ``AssumeRole`` allow it.
moto ignores the session policy (it evaluates the role's own policies at most), so a test of
scoped credentials needs this: a loopback HTTP proxy in front of moto's server that

- forwards STS ``AssumeRole`` calls and remembers which temporary access key got which
  session policy (read from the request's ``Policy`` and the answer's ``AccessKeyId``);
- for S3 requests signed with such a key, evaluates the session policy for the request's
  action and resource (and the ``s3:prefix`` of a listing) and answers 403 AccessDenied as S3
  does when it does not allow it; everything else is forwarded unchanged, except inside
  :meth:`SessionPolicyS3.only_vended`, where an S3 request not signed with vended credentials
  (e.g. with a key a client should never have held) is refused too.

The evaluator is deliberately small (no maintained library evaluates request context against
IAM policies in Python: ``policyuniverse`` on PyPI expands and summarises policies, and no
``iam-policy-evaluator`` distribution exists): Allow/Deny statements, ``Action`` and
``Resource`` with ``*``/``?`` wildcards, and the ``StringLike``/``StringEquals`` conditions
on ``s3:prefix``. A request no Allow statement matches is denied (implicit deny); an explicit
Deny wins.
"""

from __future__ import annotations

import http.client
import json
import re
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self
from urllib.parse import parse_qs, unquote, urlsplit
from xml.etree import ElementTree

_CREDENTIAL = re.compile(r"Credential=([^/,\s]+)/")
_ACCESS_KEY = re.compile(r"<AccessKeyId>([^<]+)</AccessKeyId>")


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def aws_like(pattern: str, value: str, *, ignore_case: bool = False) -> bool:
    """IAM's wildcard match, as AWS documents it for ``Action``, ``Resource`` and
    ``StringLike``: ``*`` matches any run of characters (``/`` included), ``?`` exactly one;
    every other character, ``[`` and ``]`` among them, matches only itself. Resources and
    conditions compare case-sensitively, actions not (``ignore_case``)."""
    regex = "".join(".*" if ch == "*" else "." if ch == "?" else re.escape(ch) for ch in pattern)
    flags = re.DOTALL | (re.IGNORECASE if ignore_case else 0)
    return re.fullmatch(regex, value, flags) is not None


def _matches(patterns: Iterable[str], value: str, *, ignore_case: bool = False) -> bool:
    return any(aws_like(pattern, value, ignore_case=ignore_case) for pattern in patterns)


def _conditions_hold(condition: dict[str, Any], context: dict[str, str]) -> bool:
    for operator, tests in condition.items():
        for key, expected in tests.items():
            actual = context.get(key)
            if actual is None:
                return False
            allowed = [str(e) for e in _as_list(expected)]
            if operator == "StringLike" and not _matches(allowed, actual):
                return False
            if operator == "StringEquals" and actual not in allowed:
                return False
            if operator not in ("StringLike", "StringEquals"):
                return False  # unknown operator: never satisfied
    return True


def is_allowed(
    policy: dict[str, Any], action: str, resource: str, context: dict[str, str] | None = None
) -> bool:
    """Whether ``policy`` allows ``action`` on ``resource`` (IAM's evaluation, reduced)."""
    context = context or {}
    allowed = False
    for statement in _as_list(policy.get("Statement", [])):
        if not _matches(_as_list(statement.get("Action", [])), action, ignore_case=True):
            continue
        if not _matches(_as_list(statement.get("Resource", [])), resource):
            continue
        if not _conditions_hold(statement.get("Condition", {}), context):
            continue
        if statement.get("Effect") == "Deny":
            return False
        allowed = allowed or statement.get("Effect") == "Allow"
    return allowed


def s3_request(method: str, path: str, query: str) -> tuple[str, str, dict[str, str]]:
    """The action, resource ARN and condition context of a path-style S3 request."""
    bucket, _, key = unquote(path).lstrip("/").partition("/")
    params = {name: values[0] for name, values in parse_qs(query, True).items()}
    if not key:
        if method in ("GET", "HEAD") and "location" in params:
            return "s3:GetBucketLocation", f"arn:aws:s3:::{bucket}", {}
        if method == "GET":
            return (
                "s3:ListBucket",
                f"arn:aws:s3:::{bucket}",
                {"s3:prefix": params.get("prefix", "")},
            )
        return f"s3:{method}Bucket", f"arn:aws:s3:::{bucket}", {}
    resource = f"arn:aws:s3:::{bucket}/{key}"
    if method == "DELETE":
        action = "s3:AbortMultipartUpload" if "uploadId" in params else "s3:DeleteObject"
    elif method in ("PUT", "POST"):
        action = "s3:PutObject"
    else:
        action = "s3:GetObject"
    return action, resource, {}


def s3_requests(
    method: str, path: str, query: str, body: bytes = b""
) -> list[tuple[str, str, dict[str, str]]]:
    """What S3 authorizes for a request: its one action, or for a multi-object delete
    (``POST /bucket?delete``) one ``s3:DeleteObject`` per key its body names, as AWS does."""
    bucket, _, key = unquote(path).lstrip("/").partition("/")
    if method == "POST" and not key and "delete" in parse_qs(query, True):
        names = [
            element.text or ""
            for element in ElementTree.fromstring(body or b"<Delete/>").iter()
            if element.tag.rpartition("}")[2] == "Key"
        ]
        return [("s3:DeleteObject", f"arn:aws:s3:::{bucket}/{name}", {}) for name in names]
    return [s3_request(method, path, query)]


class SessionPolicyS3:
    """The proxy on 127.0.0.1 (OS-chosen port) in front of ``upstream`` (moto's server URL).

    Point STS and S3 clients at :attr:`endpoint`. :attr:`refusals` lists what was denied,
    :attr:`signers` the access keys that signed S3 requests, in order.
    """

    def __init__(self, upstream: str) -> None:
        self.upstream = urlsplit(upstream)
        self.policies: dict[str, dict[str, Any]] = {}
        self.refusals: list[tuple[str, str]] = []
        self.signers: list[str] = []
        self._lock = threading.Lock()
        self._vended_only = False
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.endpoint = ""

    def __enter__(self) -> Self:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        host, port = self._server.server_address[:2]
        self.endpoint = f"http://{host}:{port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)

    @contextmanager
    def only_vended(self) -> Iterator[None]:
        """Meanwhile, refuse S3 requests signed with anything but vended credentials (or not
        signed): a test whose client may hold nothing else proves it used nothing else."""
        self._vended_only = True
        try:
            yield
        finally:
            self._vended_only = False

    def remember(self, access_key: str, policy: dict[str, Any]) -> None:
        with self._lock:
            self.policies[access_key] = policy

    def policy_of(self, headers: Any) -> dict[str, Any] | None:
        """The session policy of the request's signer (None: not vended); records the signer."""
        found = _CREDENTIAL.search(headers.get("Authorization", ""))
        if found is None:
            return None
        with self._lock:
            self.signers.append(found.group(1))
            return self.policies.get(found.group(1))

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def _relay(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                parts = urlsplit(self.path)
                form = parse_qs(body.decode("utf-8", "replace")) if body else {}
                if form.get("Action") == ["AssumeRole"]:
                    status, headers, answer = self._forward(body)
                    found = _ACCESS_KEY.search(answer.decode("utf-8", "replace"))
                    if status == 200 and found and form.get("Policy"):
                        proxy.remember(found.group(1), json.loads(form["Policy"][0]))
                    return self._answer(status, headers, answer)
                policy = proxy.policy_of(self.headers)
                if policy is not None or proxy._vended_only:
                    asked = s3_requests(self.command, parts.path, parts.query, body)
                    refused = [
                        (action, resource)
                        for action, resource, context in asked
                        if policy is None or not is_allowed(policy, action, resource, context)
                    ]
                    if refused or (policy is None and not asked):
                        with proxy._lock:
                            proxy.refusals.extend(refused or [(self.command, parts.path)])
                        return self._deny()
                self._answer(*self._forward(body))

            def _forward(self, body: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
                connection = http.client.HTTPConnection(
                    proxy.upstream.hostname, proxy.upstream.port, timeout=60
                )
                try:
                    headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
                    headers["Host"] = proxy.upstream.netloc
                    connection.request(self.command, self.path, body=body, headers=headers)
                    response = connection.getresponse()
                    return response.status, response.getheaders(), response.read()
                finally:
                    connection.close()

            def _answer(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
                self.send_response(status)
                # A HEAD answer has no body but states the object's length: keep that one.
                keep_length = self.command == "HEAD" and any(
                    name.lower() == "content-length" for name, _ in headers
                )
                dropped = {"transfer-encoding", "connection"}
                if not keep_length:
                    dropped.add("content-length")
                    self.send_header("Content-Length", str(len(body)))
                for name, value in headers:
                    if name.lower() not in dropped:
                        self.send_header(name, value)
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            def _deny(self) -> None:
                body = (
                    b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code>'
                    b"<Message>Access Denied (session policy)</Message></Error>"
                )
                self._answer(403, [("Content-Type", "application/xml")], body)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _relay

        return Handler
