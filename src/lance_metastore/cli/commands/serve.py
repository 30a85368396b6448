"""``serve``: the namespace over the Lance Namespace REST spec (:mod:`lance_metastore.rest`)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ..app import CliFailure, running
from ..config import ConfigError

if TYPE_CHECKING:
    from ...rest import AccessControl


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
    tokens_file: Annotated[
        Path | None,
        typer.Option(
            "--tokens-file",
            metavar="PATH",
            help="Bearer tokens of several principals, a JSON object {principal: token or "
            "[tokens]} (refused if other users can write it).",
        ),
    ] = None,
    api_keys_file: Annotated[
        Path | None,
        typer.Option(
            "--api-keys-file",
            metavar="PATH",
            help="Accept 'x-api-key: <key>', keys per principal as in --tokens-file.",
        ),
    ] = None,
    jwt_jwks: Annotated[
        str | None,
        typer.Option(
            "--jwt-jwks",
            metavar="PATH|URL",
            help="Accept JWT access tokens signed by a key of this JWKS file or URL "
            "(needs --jwt-issuer and --jwt-audience).",
        ),
    ] = None,
    jwt_issuer: Annotated[
        str | None, typer.Option("--jwt-issuer", metavar="ISS", help="The tokens' issuer (iss).")
    ] = None,
    jwt_audience: Annotated[
        str | None,
        typer.Option("--jwt-audience", metavar="AUD", help="The audience (aud) tokens must name."),
    ] = None,
    jwt_principal_claim: Annotated[
        str,
        typer.Option("--jwt-principal-claim", metavar="CLAIM", help="The claim naming the caller."),
    ] = "sub",
    auth_scheme: Annotated[
        str | None,
        typer.Option(
            "--auth-scheme",
            metavar="NAME|CLASS",
            help="An authentication scheme by name (bearer, api-key, jwt) or class path "
            "(package.module:Class), made with the --auth-option values.",
        ),
    ] = None,
    auth_options: Annotated[
        list[str] | None,
        typer.Option("--auth-option", metavar="KEY=VALUE", help="An option of --auth-scheme."),
    ] = None,
    policy_file: Annotated[
        Path | None,
        typer.Option(
            "--policy-file",
            metavar="PATH",
            help="Privileges per principal on namespace prefixes (JSON or YAML); "
            "without it every admitted caller may do everything.",
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
    max_json_mb: Annotated[
        float,
        typer.Option(
            "--max-json-mb",
            metavar="MB",
            min=0.001,
            help="JSON request body limit (every operation but the Arrow data ones).",
        ),
    ] = 1,
    threads: Annotated[
        int,
        typer.Option(
            "--threads",
            metavar="N",
            min=1,
            help=(
                "Requests worked on at once (parsing, catalog calls), each on a thread: "
                "N metadata reads, N scans and N changes, each kind on threads of its own."
            ),
        ),
    ] = 32,
    max_in_flight_per_client: Annotated[
        int,
        typer.Option(
            "--max-in-flight-per-client",
            metavar="N",
            min=1,
            help="Requests in progress per client address; past it 429 (code 21).",
        ),
    ] = 64,
    max_in_flight_per_principal: Annotated[
        int,
        typer.Option(
            "--max-in-flight-per-principal",
            metavar="N",
            min=1,
            help="Requests in progress per authenticated principal; past it 429 (code 21).",
        ),
    ] = 24,
    request_timeout: Annotated[
        float,
        typer.Option(
            "--request-timeout",
            metavar="SECONDS",
            min=0.1,
            help="Time a request's headers and body have to arrive, from its first byte.",
        ),
    ] = 60.0,
    max_connections_per_client: Annotated[
        int,
        typer.Option(
            "--max-connections-per-client",
            metavar="N",
            min=1,
            help="Open connections per client address; past it 429 (code 21).",
        ),
    ] = 128,
    max_connections_per_principal: Annotated[
        int,
        typer.Option(
            "--max-connections-per-principal",
            metavar="N",
            min=1,
            help="Open connections per authenticated principal (a connection's first "
            "authenticated request names it); past it 429 (code 21) and the connection closes.",
        ),
    ] = 128,
    http: Annotated[
        str,
        typer.Option(
            "--http",
            metavar="auto|h11|httptools",
            help="HTTP/1.1 parser; auto: httptools (C) when installed, else h11.",
        ),
    ] = "auto",
    loop: Annotated[
        str,
        typer.Option(
            "--loop",
            metavar="auto|asyncio|uvloop",
            help="Event loop; auto: uvloop when installed, else asyncio's.",
        ),
    ] = "auto",
    metrics_token_file: Annotated[
        Path | None,
        typer.Option(
            "--metrics-token-file",
            metavar="PATH",
            help="/metrics answers 'Authorization: Bearer <token in this file>' from anywhere "
            "[default: loopback callers only].",
        ),
    ] = None,
    log_format: Annotated[
        str,
        typer.Option(
            "--log-format",
            metavar="text|json",
            help="Audit lines as key=value text or as JSON objects (the same fields).",
        ),
    ] = "text",
    workers: Annotated[
        int,
        typer.Option(
            "--workers",
            metavar="N",
            min=1,
            help="Processes sharing the port, each a whole server; SIGHUP and SIGTERM reach all.",
        ),
    ] = 1,
    listen_fd: Annotated[
        int | None,
        typer.Option("--listen-fd", hidden=True, help="A worker's inherited listening socket."),
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
    SIGHUP re-reads the token, key, JWKS and policy files; open connections stay open.
    """
    with running(ctx) as state:
        # Inside running(): without the server extra this is its one-line error.
        from ...rest import (
            ClientLimits,
            ExposureError,
            check_exposure,
            is_loopback,
        )
        from ...rest import serve as serve_rest
        from ...rest.auth import read_private_file
        from ...rest.connections import http_implementation
        from ...rest.server import loop_implementation

        if bool(tls_cert) != bool(tls_key):
            raise ConfigError("TLS needs both --tls-cert and --tls-key")
        if jwt_jwks and not (jwt_issuer and jwt_audience):
            raise ConfigError("--jwt-jwks needs --jwt-issuer and --jwt-audience")
        try:
            access = _access_control(
                auth_token_file=auth_token_file,
                tokens_file=tokens_file,
                api_keys_file=api_keys_file,
                jwt_options={
                    "issuer": jwt_issuer or "",
                    "audience": jwt_audience or "",
                    "jwks": jwt_jwks or "",
                    "principal_claim": jwt_principal_claim,
                }
                if jwt_jwks
                else None,
                auth_scheme=auth_scheme,
                auth_options=auth_options or [],
                policy_file=policy_file,
            )
            check_exposure(host, access, insecure)
        except (ValueError, OSError) as error:
            raise ConfigError(str(error)) from None
        if not is_loopback(host):
            if not access.authenticates:
                _warn(f"serving {host} without authentication (--insecure)")
            elif not tls_cert:
                _warn(f"serving {host} without TLS: credentials cross the network in clear")
        limits = ClientLimits(
            header_timeout=header_timeout,
            body_timeout=body_timeout,
            keep_alive_timeout=keep_alive_timeout,
            max_connections=max_connections,
            request_timeout=request_timeout,
            max_connections_per_client=max_connections_per_client,
            max_connections_per_principal=max_connections_per_principal,
        )
        try:
            http_implementation(http)
            loop_implementation(loop)
        except ValueError as error:
            raise ConfigError(str(error)) from None
        if log_format not in ("text", "json"):
            raise ConfigError(f"--log-format takes text or json, not {log_format!r}")
        metrics_token = None
        if metrics_token_file:
            try:
                metrics_token = read_private_file(
                    str(metrics_token_file), "metrics token file", _warn
                )
            except (ValueError, OSError) as error:
                raise ConfigError(str(error)) from None

        def announce(url: str) -> None:
            sys.stdout.write(url + "\n")
            sys.stdout.flush()

        if workers > 1:
            from ...rest.server import serve_workers

            try:
                status = serve_workers(
                    _worker_command(),
                    workers,
                    host,
                    port,
                    tls=bool(tls_cert),
                    on_ready=announce,
                )
            except OSError as error:
                raise CliFailure(f"cannot serve on {host}:{port}: {error}") from None
            if status:
                raise CliFailure(f"a worker stopped with status {status}")
            return
        namespace = state.namespace()

        try:
            serve_rest(
                namespace,
                host,
                port,
                access=access,
                tls_cert=str(tls_cert) if tls_cert else None,
                tls_key=str(tls_key) if tls_key else None,
                max_body_bytes=max_body_mb * 1024 * 1024,
                max_decoded_bytes=max_decoded_mb * 1024 * 1024 if max_decoded_mb else None,
                max_json_bytes=int(max_json_mb * 1024 * 1024),
                worker_threads=threads,
                metrics_token=metrics_token,
                audit_json=log_format == "json",
                max_in_flight_per_client=max_in_flight_per_client,
                max_in_flight_per_principal=max_in_flight_per_principal,
                limits=limits,
                insecure=insecure,
                on_ready=announce,
                audit_stream=sys.stderr,
                listen_fd=listen_fd,
                http=http,
                loop=loop,
            )
        except ExposureError as error:
            raise ConfigError(str(error)) from None
        except OSError as error:
            raise CliFailure(f"cannot serve on {host}:{port}: {error}") from None


def _worker_command() -> list[str]:
    """This command line, run again as one worker (``--workers`` dropped)."""
    args = sys.argv[1:]
    kept: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg == "--workers":
            skip = True
        elif not arg.startswith("--workers="):
            kept.append(arg)
    return [sys.executable, "-m", "lance_metastore.cli", *kept]


def _access_control(
    *,
    auth_token_file: Path | None,
    tokens_file: Path | None,
    api_keys_file: Path | None,
    jwt_options: dict[str, str] | None,
    auth_scheme: str | None,
    auth_options: list[str],
    policy_file: Path | None,
) -> AccessControl:
    """The schemes the flags configure, tried in this order, and the policy file."""
    from ...rest import AccessControl, ApiKeys, BearerTokens, JwtBearer, authenticator_from
    from ...rest.auth import Authenticator, read_private_file

    schemes: list[Authenticator] = []
    if auth_token_file:
        read_private_file(str(auth_token_file), "auth token file", _warn)  # warns once, here
        schemes.append(BearerTokens(token_file=str(auth_token_file)))
    if tokens_file:
        read_private_file(str(tokens_file), "tokens file", _warn)
        schemes.append(BearerTokens(file=str(tokens_file)))
    if api_keys_file:
        read_private_file(str(api_keys_file), "API keys file", _warn)
        schemes.append(ApiKeys(file=str(api_keys_file)))
    if jwt_options:
        jwks = jwt_options.get("jwks", "")
        if jwks and not jwks.startswith(("https://", "http://")):  # a local key set file
            read_private_file(jwks, "JWT key set file", _warn)
        schemes.append(JwtBearer(**jwt_options))
    if auth_scheme:
        options = {}
        for option in auth_options:
            key, equals, value = option.partition("=")
            if not equals or not key:
                raise ValueError(f"--auth-option takes KEY=VALUE, not {option!r}")
            options[key] = value
        schemes.append(authenticator_from(auth_scheme, options))
    elif auth_options:
        raise ValueError("--auth-option needs --auth-scheme")
    if policy_file:
        read_private_file(str(policy_file), "policy file", _warn)  # names what it grants
    return AccessControl(schemes, str(policy_file) if policy_file else None)
