"""``hms start|status|stop``: a local Hive Metastore (2.3 from the pyspark wheel, 3.1 or 4 from
Maven Central) for development."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from ..app import EXIT_NOT_RUNNING, CliFailure, JsonFlag, running
from ..config import ENV_HMS_DATA_DIR

# Shared with scripts/demo.sh, so the CLI finds what the demo made.
DEFAULT_HMS_DATA_DIR = Path(".lance-metastore") / "hms"

hms_app = typer.Typer(
    help="A local Hive Metastore (from the pyspark wheel) for development.",
    no_args_is_help=True,
)


def register(app: typer.Typer) -> None:
    app.add_typer(hms_app, name="hms")


DataDirOption = Annotated[
    Path | None,
    typer.Option(
        "--data-dir",
        metavar="DIR",
        help=f"Metastore state directory (default ./{DEFAULT_HMS_DATA_DIR}) "
        f"[env {ENV_HMS_DATA_DIR}]",
    ),
]


def hms_data_dir(option: Path | None) -> Path:
    if option is not None:
        return option.expanduser().resolve()
    env = os.environ.get(ENV_HMS_DATA_DIR)
    return Path(env).expanduser().resolve() if env else DEFAULT_HMS_DATA_DIR.resolve()


def status_document(status: Any) -> dict[str, Any]:
    return {
        "version": getattr(status, "version", None),
        "running": status.running,
        "uri": status.uri,
        "pid": status.pid,
        "port": status.port,
        "data_dir": str(status.data_dir),
        "log": str(status.log_path),
    }


@hms_app.command("start")
def hms_start(
    ctx: typer.Context,
    data_dir: DataDirOption = None,
    port: Annotated[
        int, typer.Option("--port", metavar="PORT", min=0, max=65535, help="0: a free port")
    ] = 0,
    host: Annotated[
        str | None,
        typer.Option(
            "--host",
            metavar="HOST",
            help="Address to listen on (0.0.0.0: every interface; the metastore has no "
            "authentication). Default: the one the data directory used, else 127.0.0.1.",
        ),
    ] = None,
    exist_ok: Annotated[
        bool, typer.Option("--exist-ok", help="Succeed if it already runs there.")
    ] = False,
    version: Annotated[
        str | None,
        typer.Option(
            "--version",
            metavar="2.3|3.1|4",
            help="Hive Metastore release: 2.3 (pyspark's, the default), 3.1 or 4 (fetched "
            "once with Maven). Default: the one the data directory holds.",
        ),
    ] = None,
    s3_endpoint: Annotated[
        str | None,
        typer.Option(
            "--s3-endpoint",
            metavar="URL",
            help="Let tables live on s3:// (3.1 only): the S3 endpoint the metastore checks "
            "table directories on ('aws': AWS itself), signing with AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY if set. Default: what the data directory used.",
        ),
    ] = None,
    json_flag: JsonFlag = False,
) -> None:
    """Start a local Hive Metastore in the background and print its thrift:// uri."""
    from ...hive.local import LocalMetastore, MetastoreAlreadyRunningError, java_executable
    from ...rules.loopback import is_loopback

    with running(ctx, json_flag) as state:
        directory = hms_data_dir(data_dir)
        s3 = s3_options(s3_endpoint)
        try:
            metastore = LocalMetastore.from_data_dir(directory)
            wanted = version or metastore.version
            wanted_host = host or metastore.host
            changed = (
                (port and metastore.port != port)
                or wanted != metastore.version
                or wanted_host != metastore.host
                or s3
            )
            if changed and not metastore.is_running():
                s3 = s3 or {
                    "s3_endpoint": metastore.s3_endpoint,
                    "s3_credentials": metastore.s3_credentials,
                }
                metastore = LocalMetastore(
                    directory, port=port or metastore.port, host=wanted_host, version=wanted, **s3
                )
        except FileNotFoundError:
            metastore = LocalMetastore(
                directory, port=port, host=host or "127.0.0.1", version=version or "2.3", **s3
            )
        if not is_loopback(metastore.host):
            sys.stderr.write(
                f"warning: the metastore listens on {metastore.host}: it has no "
                "authentication, so anyone who reaches it can read and change the catalog\n"
            )
        already = False
        try:
            if not metastore.is_running():
                java_executable()  # a missing Java is the one line, not after this note
                # One line before the wait, also where no spinner shows (pipes, files, CI): the
                # first start takes ~20 s, and a silent command looks hung.
                state.output.note(
                    f"starting Hive Metastore {metastore.version} in {directory} "
                    "(about 20 s the first time) ..."
                )
            with state.output.spinner(f"starting the metastore in {directory}"):
                metastore.start()
        except MetastoreAlreadyRunningError as error:
            if not exist_ok:
                running_one = str(error).split(";")[0]
                where = f" --data-dir {directory}" if data_dir is not None else ""
                raise CliFailure(
                    f"{running_one}: reuse it with `lance-metastore hms start{where} --exist-ok` "
                    f"(prints its uri), or stop it first with `lance-metastore hms stop{where}`"
                ) from None
            metastore = LocalMetastore.from_data_dir(directory)
            already = True
        document = {**status_document(metastore.status()), "already_running": already}
        if already:
            state.output.note(f"already running in {directory}")
        state.output.line(document, document["uri"])


def s3_options(endpoint: str | None) -> dict[str, Any]:
    """``LocalMetastore``'s S3 arguments for ``--s3-endpoint`` (empty without it)."""
    if endpoint is None:
        return {}
    keys = (os.environ.get("AWS_ACCESS_KEY_ID"), os.environ.get("AWS_SECRET_ACCESS_KEY"))
    return {
        "s3_endpoint": "" if endpoint.lower() == "aws" else endpoint,
        "s3_credentials": keys if all(keys) else None,
    }


@hms_app.command("status")
def hms_status(
    ctx: typer.Context,
    data_dir: DataDirOption = None,
    json_flag: JsonFlag = False,
) -> None:
    """Whether the local metastore runs (exit 0) or not (exit 3), and its uri."""
    from ...hive.local import LocalMetastore

    with running(ctx, json_flag) as state:
        directory = hms_data_dir(data_dir)
        try:
            document = status_document(LocalMetastore.from_data_dir(directory).status())
        except FileNotFoundError:
            document = dict.fromkeys(
                ("version", "running", "uri", "pid", "port", "data_dir", "log")
            )
            document.update(running=False, data_dir=str(directory))
        if document["running"]:
            text = f"running {document['uri']} (pid {document['pid']}, data {directory})"
        else:
            last = f" (last uri {document['uri']})" if document["uri"] else ""
            text = f"stopped{last}, data {directory}"
        state.output.line(document, text)
        if not document["running"]:
            raise typer.Exit(EXIT_NOT_RUNNING)


@hms_app.command("stop")
def hms_stop(
    ctx: typer.Context,
    data_dir: DataDirOption = None,
    json_flag: JsonFlag = False,
) -> None:
    """Stop the local metastore of a data directory (no-op if it is not running)."""
    from ...hive.local import LocalMetastore

    with running(ctx, json_flag) as state:
        directory = hms_data_dir(data_dir)
        metastore = LocalMetastore.from_data_dir(directory)
        was_running = metastore.status().process_alive
        with state.output.spinner("stopping the metastore"):
            metastore.stop()
        document = {"stopped": True, "was_running": was_running, "data_dir": str(directory)}
        state.output.line(document, "stopped" if was_running else "was not running")
