"""What the access-control tests share: private files, RSA keys, signed tokens, a JWKS server.

Keys are made with ``cryptography`` and tokens signed with PyJWT, the libraries the server
itself uses to check them; the JWKS server is a plain ``http.server`` on 127.0.0.1.
"""

from __future__ import annotations

import http.server
import json
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

ISSUER = "https://issuer.test"
AUDIENCE = "lance-metastore"


def private_file(path: Path, content: Any) -> Path:
    """``content`` (JSON unless a string) in ``path``, readable and writable by its owner only."""
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    os.chmod(path, 0o600)
    return path


SCHEMES = ("bearer", "api-key", "jwt")


def policy_file(path: Path, grants: list[tuple[str, list[str], str]]) -> Path:
    """A policy of ``grants``; a principal written without a scheme is mapped, under the
    policy's ``principals``, to that name proved by any of the server's schemes."""
    entries = [{"principal": p, "namespace": ns, "privilege": priv} for p, ns, priv in grants]
    plain = {p for p, _, _ in grants if p != "*" and ":" not in p}
    principals = {p: [f"{scheme}:{p}" for scheme in SCHEMES] for p in sorted(plain)}
    return private_file(path, {"principals": principals, "grants": entries})


class SigningKey:
    """An RSA key pair with a key id: signs tokens, and publishes its public half as a JWK."""

    def __init__(self, key_id: str) -> None:
        self.key_id = key_id
        self.private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.public_pem = (
            self.private.public_key()
            .public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
            .decode()
        )
        self.private_pem = self.private.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ).decode()

    def jwk(self) -> dict[str, Any]:
        public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.private.public_key()))
        return {**public, "kid": self.key_id, "use": "sig", "alg": "RS256"}

    def token(self, subject: str = "alice", **claims: Any) -> str:
        now = int(time.time())
        payload = {"iss": ISSUER, "aud": AUDIENCE, "sub": subject, "iat": now, "exp": now + 600}
        payload.update(claims)
        payload = {key: value for key, value in payload.items() if value is not None}
        return jwt.encode(payload, self.private, algorithm="RS256", headers={"kid": self.key_id})


def jwks(*keys: SigningKey) -> dict[str, Any]:
    return {"keys": [key.jwk() for key in keys]}


class JwksServer:
    """Serves a JWKS document on 127.0.0.1 and counts its fetches; ``keys`` may change."""

    def __init__(self, *keys: SigningKey) -> None:
        self.keys = list(keys)
        self.fetches = 0
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                owner.fetches += 1
                body = json.dumps(jwks(*owner.keys)).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/jwks.json"

    @contextmanager
    def running(self) -> Iterator[JwksServer]:
        thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self.server.shutdown()
            self.server.server_close()
            thread.join(10)
