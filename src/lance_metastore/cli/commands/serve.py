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


def _warn(text: str) -> None:
    """Security warnings reach stderr whatever the output format."""
    sys.stderr.write(f"warning: {text}\n")
    sys.stderr.flush()


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
            help="Require 'Authorization: Bearer <token>' with the token in this file "
            "(refused if other users can write it).",
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
    max_decoded_mb: Annotated[
        int | None,
        typer.Option(
            "--max-decoded-mb",
            metavar="MB",
            min=1,
            help="What an Arrow data body may decode to [default: 4x --max-body-mb].",
        ),
    ] = None,
    header_timeout: Annotated[
        float,
        typer.Option(
            "--header-timeout",
            metavar="SECONDS",
            min=0.1,
            help="Time a new connection has to send its request headers.",
        ),
    ] = 10.0,
    body_timeout: Annotated[
        float,
        typer.Option(
            "--body-timeout",
            metavar="SECONDS",
            min=0.1,
            help="Longest pause while a request body arrives.",
        ),
    ] = 30.0,
    keep_alive_timeout: Annotated[
        int,
        typer.Option(
            "--keep-alive-timeout",
            metavar="SECONDS",
            min=1,
            help="Time an idle connection stays open between requests.",
        ),
    ] = 5,
    max_connections: Annotated[
        int,
        typer.Option(
            "--max-connections",
            metavar="N",
            min=1,
            help="Open connections at most; past it the longest idle one is closed.",
        ),
    ] = 512,
    insecure: Annotated[
        bool,
        typer.Option(
            "--insecure",
            help="Serve beyond loopback without authentication (refused otherwise).",
        ),
    ] = False,
) -> None:
    """Serve the namespace over the Lance Namespace REST spec until SIGTERM or Ctrl-C.

    Prints the URL it serves on as its first line; one audit line per request on stderr.
    """
    with running(ctx) as state:
        # Inside running(): without the server extra this is its one-line error.
        from ...rest import (
            ClientLimits,
            ExposureError,
            check_exposure,
            is_loopback,
            read_token_file,
        )
        from ...rest import serve as serve_rest

        if bool(tls_cert) != bool(tls_key):
            raise ConfigError("TLS needs both --tls-cert and --tls-key")
        try:
            token = read_token_file(str(auth_token_file), _warn) if auth_token_file else None
            check_exposure(host, token, insecure)
        except (ValueError, OSError) as error:
            raise ConfigError(str(error)) from None
        if not is_loopback(host):
            if token is None:
                _warn(f"serving {host} without authentication (--insecure)")
            elif not tls_cert:
                _warn(f"serving {host} without TLS: the token crosses the network in clear")
        limits = ClientLimits(
            header_timeout=header_timeout,
            body_timeout=body_timeout,
            keep_alive_timeout=keep_alive_timeout,
            max_connections=max_connections,
        )
        namespace = state.namespace()

        def announce(url: str) -> None:
            sys.stdout.write(url + "\n")
            sys.stdout.flush()

        try:
            serve_rest(
                namespace,
                host,
                port,
                auth_token=token,
                tls_cert=str(tls_cert) if tls_cert else None,
                tls_key=str(tls_key) if tls_key else None,
                max_body_bytes=max_body_mb * 1024 * 1024,
                max_decoded_bytes=max_decoded_mb * 1024 * 1024 if max_decoded_mb else None,
                limits=limits,
                insecure=insecure,
                on_ready=announce,
                audit_stream=sys.stderr,
            )
        except ExposureError as error:
            raise ConfigError(str(error)) from None
        except OSError as error:
            raise CliFailure(f"cannot serve on {host}:{port}: {error}") from None
