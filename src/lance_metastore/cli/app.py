"""The ``lance-metastore`` app: global options, the state a command runs with, exit codes.

Every command connects one namespace (``--impl`` plus its properties, from flags, environment
variables or a profile of the config file; see :mod:`lance_metastore.cli.config`), runs
operations of the Lance namespace spec, and shows the result through the :class:`Output`
that ``--json`` chose.

Exit codes: 0 success; 1 a failure outside the namespace spec (the local metastore, a declined
confirmation); 2 a usage or configuration error; 3 ``hms status`` of a stopped metastore;
``10 + code`` for an error of the namespace spec carrying ``code`` (e.g. 14 for
TableNotFound, code 4); 130 interrupted. Secrets never appear in any output.
"""

from __future__ import annotations

import contextlib
import logging
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from .. import __version__
from ..impls import UnknownImplError, impl_choices, namespace_class
from ..rules.identifiers import join_identifier, parse_identifier
from ..rules.impl_aliases import ALIASES
from ..rules.redaction import scrub, secret_values
from .config import ConfigError, Resolved, parse_assignments, resolve
from .output import Output, RichOutput

EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_NOT_RUNNING = 3
EXIT_SPEC_BASE = 10
EXIT_INTERRUPTED = 130

logger = logging.getLogger("lance_metastore.cli")


class CliFailure(Exception):
    """A failure outside the namespace spec: printed as ``error: message``, exit code given."""

    def __init__(self, message: str, exit_code: int = EXIT_FAILURE) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass
class State:
    """The global options, and the namespace and output built from them on first use."""

    impl: str | None = None
    profile: str | None = None
    config: str | None = None
    props: list[str] = field(default_factory=list)
    shorthands: dict[str, str | None] = field(default_factory=dict)
    json: bool = False
    debug: bool = False
    # The identifiers the command named, for the hint of a not-found error.
    ids: list[list[str]] = field(default_factory=list)
    _resolved: Resolved | None = None
    _namespace: Any = None
    _output: Output | None = None

    @property
    def output(self) -> Output:
        """The JSON output with ``--json``, else the rich one (chosen once, on first use)."""
        if self._output is None:
            self._output = Output() if self.json else RichOutput()
        return self._output

    def resolved(self) -> Resolved:
        if self._resolved is None:
            self._resolved = resolve(
                impl=self.impl,
                profile=self.profile,
                config=self.config,
                props=self.props,
                shorthands=self.shorthands,
            )
        return self._resolved

    def secrets(self) -> list[str]:
        """Values to scrub from anything printed, even when resolving itself failed."""
        if self._resolved is not None:
            return self._resolved.secret_values()
        with contextlib.suppress(ConfigError):
            return secret_values(parse_assignments(self.props))
        return []

    def namespace(self) -> Any:
        if self._namespace is None:
            resolved = self.resolved()
            if not resolved.impl:
                raise ConfigError(
                    f"no implementation chosen: give --impl ({impl_choices()}), "
                    "set LANCE_METASTORE_IMPL, or set impl in a profile of the config file"
                )
            try:
                cls = namespace_class(resolved.impl)
            except UnknownImplError as error:
                raise ConfigError(str(error)) from None
            self._namespace = cls(**resolved.properties)
        return self._namespace

    def identify(self, text: str | None) -> list[str]:
        """The parts of an identifier the command names (remembered for error hints)."""
        parts = list(parse_identifier(text))
        self.ids.append(parts)
        return parts

    def missing_parent_hint(self, message: str) -> str:
        """For a not-found error, the first ancestor namespace of the named id that does not
        exist: the same rule, through spec calls, for every backend (``''`` when all exist,
        when the message already names it, or when asking fails)."""
        from lance_namespace import NamespaceExistsRequest
        from lance_namespace.errors import NamespaceNotFoundError

        if not self.ids or self._namespace is None:
            return ""
        parts = self.ids[0]
        for depth in range(1, len(parts)):
            parent = parts[:depth]
            try:
                self._namespace.namespace_exists(NamespaceExistsRequest(id=parent))
            except NamespaceNotFoundError:
                name = join_identifier(parent)
                if f"'{name}'" in message:
                    return ""
                return f"; namespace '{name}' does not exist"
            except Exception:
                return ""
        return ""

    def id_shape_hint(self) -> str:
        """For a not-found error on Hive, how to write the id when it has the other Hive
        backend's shape: ``sales/orders`` on ``hive3`` (ids start with the catalog) or
        ``hive/sales/orders`` on ``hive2`` (no catalog level), when the id written the other
        way names an object that exists (``''`` otherwise, or when asking fails)."""
        if not self.ids or self._namespace is None:
            return ""
        parts = self.ids[0]
        backend = type(self._namespace).__name__
        try:
            if backend == "Hive3Namespace" and parts:
                catalogs = self._namespace.list_namespaces({"id": []}).namespaces
                for catalog in sorted(catalogs):
                    if catalog != parts[0] and self._names_something([catalog, *parts]):
                        written = "/".join([catalog, *parts])
                        return (
                            f"; hive3 ids start with the catalog (a Hive 3 metastore's "
                            f"default is 'hive'): write {written}"
                        )
            if backend == "Hive2Namespace" and len(parts) >= 2 and self._names_something(parts[1:]):
                written = "/".join(parts[1:])
                return f"; hive2 ids have no catalog level (database/table): write {written}"
        except Exception:
            return ""
        return ""

    def _names_something(self, parts: list[str]) -> bool:
        """Whether ``parts`` is an existing table or namespace."""
        from lance_namespace.errors import LanceNamespaceError

        for exists in (self._namespace.table_exists, self._namespace.namespace_exists):
            try:
                exists({"id": parts})
                return True
            except LanceNamespaceError:
                continue
        return False

    def close(self) -> None:
        if self._namespace is not None:
            with contextlib.suppress(Exception):
                self._namespace.close()
            self._namespace = None


def state_of(ctx: typer.Context, json_flag: bool = False) -> State:
    state = ctx.find_object(State)
    if state is None:  # a command invoked without the group
        state = State()
        ctx.obj = state
    state.json = state.json or json_flag
    return state


def code_name(code: int) -> str:
    from lance_namespace.errors import ErrorCode

    try:
        return ErrorCode(code).name
    except ValueError:
        return "UNKNOWN"


def spec_exit(
    state: State, error: Any, message: str | None = None, document: bool = True
) -> typer.Exit:
    """Report a namespace error (or a summary of one) and give the exit to raise;
    ``document=False`` when the command's own JSON document already reports it."""
    from lance_namespace.errors import (
        InvalidInputError,
        NamespaceNotFoundError,
        TableNotFoundError,
    )

    code = int(error.code)
    exit_code = EXIT_SPEC_BASE + code
    text = message if message is not None else str(error)
    if isinstance(error, (NamespaceNotFoundError, TableNotFoundError)):
        text += state.id_shape_hint() or state.missing_parent_hint(text)
    elif isinstance(error, InvalidInputError):
        text += state.id_shape_hint()
    text = scrub(text, state.secrets())
    state.output.error(text, exit_code, code, code_name(code), document=document)
    return typer.Exit(exit_code)


@contextlib.contextmanager
def running(ctx: typer.Context, json_flag: bool = False) -> Iterator[State]:
    """Run a command body: map every failure to its message and exit code, then disconnect."""
    from lance_namespace.errors import InternalError, LanceNamespaceError

    from ..hive.local import MetastoreError
    from ..rules.extras import MissingExtraError

    state = state_of(ctx, json_flag)

    def fail(message: str, exit_code: int) -> typer.Exit:
        state.output.error(scrub(message, state.secrets()), exit_code, None, None)
        return typer.Exit(exit_code)

    try:
        yield state
    except (typer.Exit, typer.Abort, typer.TyperException):
        raise
    except ConfigError as error:  # before its base class, InvalidInputError
        raise fail(str(error), EXIT_USAGE) from None
    except LanceNamespaceError as error:
        debug_traceback(state)
        raise spec_exit(state, error) from None
    except CliFailure as error:
        raise fail(str(error), error.exit_code) from None
    except (MetastoreError, FileNotFoundError, MissingExtraError) as error:
        raise fail(str(error), EXIT_FAILURE) from None
    except KeyboardInterrupt:
        raise fail("interrupted", EXIT_INTERRUPTED) from None
    except Exception as error:
        debug_traceback(state)
        unexpected = InternalError(f"unexpected {type(error).__name__}: {error}")
        raise spec_exit(state, unexpected) from None
    finally:
        state.close()


def debug_traceback(state: State) -> None:
    """With --debug: the current exception's traceback on stderr, secrets scrubbed."""
    if state.debug:
        import sys

        sys.stderr.write(scrub(traceback.format_exc(), state.secrets()))


class Group(TyperGroup):
    """With ``--json`` anywhere on the line, a usage error is also one JSON document."""

    # typer declares the base Context of its vendored click, which has no public name; typer
    # hands commands its own typer.Context, the subclass named here.
    def parse_args(self, ctx: typer.Context, args: list[str]) -> list[str]:  # type: ignore[override]
        ctx.meta["json"] = "--json" in args
        try:
            return super().parse_args(ctx, args)
        except typer.TyperException as error:
            self._json_usage_error(ctx, error)
            raise

    def invoke(self, ctx: typer.Context) -> Any:  # type: ignore[override]  # as parse_args
        try:
            return super().invoke(ctx)
        except typer.TyperException as error:
            self._json_usage_error(ctx, error)
            raise

    @staticmethod
    def _json_usage_error(ctx: typer.Context, error: Any) -> None:
        """Usage errors (click's UsageError, vendored by typer) carry exit code 2."""
        if ctx.meta.get("json") and getattr(error, "exit_code", None) == EXIT_USAGE:
            message = {"message": error.format_message(), "exit_code": error.exit_code}
            Output().document({"error": message})


app = typer.Typer(
    name="lance-metastore",
    cls=Group,
    help=(
        "Browse and manage Lance tables registered in AWS Glue and Hive Metastore.\n\n"
        "Identifiers: db$t or db/t (quote $ in shells: 'db$t')."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)

JsonFlag = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")]
PropList = Annotated[
    list[str] | None,
    typer.Option("--prop", "-p", metavar="KEY=VALUE", help="Property (repeatable)."),
]


def _show_version(value: bool) -> None:
    if value:
        print(f"lance-metastore {__version__}")
        raise typer.Exit()


@app.callback()
def main_callback(
    ctx: typer.Context,
    impl: Annotated[
        str | None,
        typer.Option(
            "--impl",
            metavar="IMPL",
            # Not impl_choices(): it asks lance_namespace for its own impls, whose import
            # would double --help's time; errors name them all.
            help=f"{', '.join(ALIASES)}, a lance_namespace impl (dir, rest, ...) or a class "
            "path pkg.mod.Class [env LANCE_METASTORE_IMPL]",
        ),
    ] = None,
    profile: Annotated[
        str | None,
        typer.Option(
            "--profile",
            metavar="NAME",
            help="Profile of the config file [env LANCE_METASTORE_PROFILE]",
        ),
    ] = None,
    config: Annotated[
        str | None,
        typer.Option(
            "--config",
            metavar="PATH",
            help="Config file (default ~/.config/lance-metastore/config.toml) "
            "[env LANCE_METASTORE_CONFIG]",
        ),
    ] = None,
    prop: Annotated[
        list[str] | None,
        typer.Option(
            "--prop",
            metavar="KEY=VALUE",
            help="Namespace property, repeatable [env LANCE_METASTORE_PROP_<NAME>]",
        ),
    ] = None,
    uri: Annotated[
        str | None,
        typer.Option("--uri", metavar="URI", help="Property uri (Hive: thrift://host:port)"),
    ] = None,
    root: Annotated[
        str | None, typer.Option("--root", metavar="PATH|URI", help="Property root (storage root)")
    ] = None,
    region: Annotated[
        str | None, typer.Option("--region", metavar="REGION", help="Property region (Glue)")
    ] = None,
    endpoint: Annotated[
        str | None, typer.Option("--endpoint", metavar="URL", help="Property endpoint (Glue)")
    ] = None,
    catalog_id: Annotated[
        str | None, typer.Option("--catalog-id", metavar="ID", help="Property catalog_id (Glue)")
    ] = None,
    json_output: Annotated[
        bool, typer.Option("--json", help="Print one JSON document on stdout.")
    ] = False,
    debug: Annotated[bool, typer.Option("--debug", help="Tracebacks and debug logs.")] = False,
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_show_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Browse and manage Lance tables registered in AWS Glue and Hive Metastore."""
    ctx.obj = State(
        impl=impl,
        profile=profile,
        config=config,
        props=list(prop or []),
        shorthands={
            "uri": uri,
            "root": root,
            "region": region,
            "endpoint": endpoint,
            "catalog_id": catalog_id,
        },
        json=json_output,
        debug=debug,
    )
    if debug:
        logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
        logging.getLogger("lance_metastore").setLevel(logging.DEBUG)
