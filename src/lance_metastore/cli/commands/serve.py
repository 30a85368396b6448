"""``serve``: the namespace over the Lance Namespace REST spec (:mod:`lance_metastore.rest`)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from ..app import CliFailure, running
from ..config import ConfigError


def register(app: typer.Typer) -> None:
    app.command("serve")(serve_command)


def serve_command(
    ctx: typer.Context,
    host: Annotated[
        str, typer.Option("--host", metavar="HOST", help="Address to listen on.")
    ] = "127.0.0.1",
    port: Annotated[
        int, typer.Option("--port", metavar="PORT", min=0, max=65535, help="0: the OS chooses.")
    ] = 2333,
    auth_token_file: Annotated[
        Path | None,
        typer.Option(
            "--auth-token-file",
            metavar="PATH",
            help="Require 'Authorization: Bearer <token>' with the token in this file.",
        ),
    ] = None,
    tls_cert: Annotated[
        Path | None, typer.Option("--tls-cert", metavar="PATH", help="TLS certificate (PEM).")
    ] = None,
    tls_key: Annotated[
        Path | None, typer.Option("--tls-key", metavar="PATH", help="TLS private key (PEM).")
    ] = None,
    max_body_mb: Annotated[
        int, typer.Option("--max-body-mb", metavar="MB", min=1, help="Request body limit.")
    ] = 256,
) -> None:
    """Serve the namespace over the Lance Namespace REST spec until SIGTERM or Ctrl-C.

    Prints the URL it serves on as its first line; one audit line per request on stderr.
    """
    from ...rest import read_token_file, serve

    with running(ctx) as state:
        if bool(tls_cert) != bool(tls_key):
            raise ConfigError("TLS needs both --tls-cert and --tls-key")
        try:
            token = read_token_file(str(auth_token_file)) if auth_token_file else None
        except ValueError as error:
            raise ConfigError(str(error)) from None
        namespace = state.namespace()

        def announce(url: str) -> None:
            sys.stdout.write(url + "\n")
            sys.stdout.flush()

        try:
            serve(
                namespace,
                host,
                port,
                auth_token=token,
                tls_cert=str(tls_cert) if tls_cert else None,
                tls_key=str(tls_key) if tls_key else None,
                max_body_bytes=max_body_mb * 1024 * 1024,
                on_ready=announce,
                audit_stream=sys.stderr,
            )
        except OSError as error:
            raise CliFailure(f"cannot serve on {host}:{port}: {error}") from None
