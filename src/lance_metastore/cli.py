"""``lance-metastore``: browse and manage Lance tables in AWS Glue and Hive Metastore.

Every command connects one namespace (``--impl`` plus its properties, from flags, environment
variables or a profile of the config file; see :mod:`lance_metastore.cli_config`), runs the
namespace operations of the Lance namespace spec, and prints the result as rich tables and
trees, or as exactly one JSON document on stdout with ``--json``.

Exit codes: 0 success; 1 a failure outside the namespace spec (the local metastore, a declined
confirmation); 2 a usage or configuration error; 3 ``hms status`` of a stopped metastore;
``10 + code`` for an error of the namespace spec carrying ``code`` (e.g. 14 for
TableNotFound, code 4); 130 interrupted. Errors go to stderr as
``error [code N NAME]: message``; secrets never appear in any output.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import logging
import os
import sys
import traceback
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from .cli_config import (
    ALIASES,
    ENV_HMS_DATA_DIR,
    ConfigError,
    Resolved,
    load_class,
    parse_assignments,
    resolve,
)
from .config import looks_secret
from .errors import scrub

# Exit codes (see the module docstring and docs/cli.md).
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_NOT_RUNNING = 3
EXIT_SPEC_BASE = 10
EXIT_INTERRUPTED = 130

DEFAULT_HMS_DATA_DIR = Path(".lance-metastore") / "hms"
DEFAULT_PAGE_SIZE = 100
DELIMITER = "$"

logger = logging.getLogger("lance_metastore.cli")


# --------------------------------------------------------------------------------------------
# Identifiers
# --------------------------------------------------------------------------------------------


def parse_id(text: str | None) -> list[str]:
    """``db$t``, ``db/t`` (or a mix, ``cat/db$t``) to ``["db", "t"]``; ``""``/``/`` is the root.

    ``/`` is accepted as a separator because no backend allows it inside a name; leading and
    trailing ``/`` are ignored. Names are validated by the namespace, not here.
    """
    if text is None:
        return []
    text = text.strip().strip("/")
    if not text:
        return []
    return text.replace("/", DELIMITER).split(DELIMITER)


def join_id(parts: Sequence[str]) -> str:
    return DELIMITER.join(parts)


# --------------------------------------------------------------------------------------------
# State shared by the commands
# --------------------------------------------------------------------------------------------


@dataclass
class State:
    impl: str | None = None
    profile: str | None = None
    config: str | None = None
    props: list[str] = field(default_factory=list)
    shorthands: dict[str, str | None] = field(default_factory=dict)
    json: bool = False
    debug: bool = False
    _resolved: Resolved | None = None
    _namespace: Any = None

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
        if self._resolved is None:
            # Errors raised while resolving must still hide what the user gave on the command
            # line as a secret-looking --prop.
            with contextlib.suppress(Exception):
                return [
                    v
                    for k, v in parse_assignments(self.props).items()
                    if v and (looks_secret(k) or k.startswith("storage."))
                ]
            return []
        return self._resolved.secret_values()

    def namespace(self) -> Any:
        if self._namespace is None:
            self._namespace = connect(self.resolved())
        return self._namespace

    def close(self) -> None:
        if self._namespace is not None:
            with contextlib.suppress(Exception):
                self._namespace.close()
            self._namespace = None


def connect(resolved: Resolved) -> Any:
    """The namespace object, built directly so its errors keep their spec codes."""
    from lance_namespace import LanceNamespace

    import lance_metastore  # noqa: F401 - registers the aliases

    impl = resolved.impl
    if not impl:
        raise ConfigError(
            "no implementation chosen: give --impl glue|hive3|hive2 (or a class path), "
            "set LANCE_METASTORE_IMPL, or set impl in a profile of the config file"
        )
    class_path = ALIASES.get(impl)
    if class_path is None:
        import lance_namespace

        registered = {
            **getattr(lance_namespace, "NATIVE_IMPLS", {}),
            **getattr(lance_namespace, "_REGISTERED_IMPLS", {}),
        }
        class_path = registered.get(impl, impl)
    if "." not in class_path:
        known = ", ".join(sorted(ALIASES))
        raise ConfigError(f"unknown impl {impl!r}: expected {known} or a class path pkg.mod.Class")
    cls = load_class(class_path)
    if not (isinstance(cls, type) and issubclass(cls, LanceNamespace)):
        raise ConfigError(f"{class_path} is not a LanceNamespace implementation")
    return cls(**resolved.properties)


def _state(ctx: typer.Context) -> State:
    state = ctx.find_object(State)
    if state is None:  # a command invoked without the group (tests calling it directly)
        state = State()
        ctx.obj = state
    return state


# --------------------------------------------------------------------------------------------
# Output and errors
# --------------------------------------------------------------------------------------------


def stdout_console() -> Console:
    return Console(highlight=False, soft_wrap=False)


def stderr_console() -> Console:
    return Console(stderr=True, highlight=False)


def _json_default(value: Any) -> Any:
    if isinstance(value, (_dt.datetime, _dt.date)):
        return value.isoformat()
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return str(value)


def print_json(document: Any) -> None:
    """Exactly one JSON document on stdout, no colours."""
    sys.stdout.write(json.dumps(document, indent=2, default=_json_default, sort_keys=False))
    sys.stdout.write("\n")
    sys.stdout.flush()


def error_code_name(code: int) -> str:
    from lance_namespace.errors import ErrorCode

    try:
        return ErrorCode(code).name
    except ValueError:
        return "UNKNOWN"


class CliFailure(Exception):
    """A failure outside the namespace spec: printed as ``error: message``, exit code given."""

    def __init__(self, message: str, exit_code: int = EXIT_FAILURE) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def report_error(
    state: State, message: str, exit_code: int, code: int | None, name: str | None
) -> None:
    message = scrub(message, state.secrets())
    prefix = f"error [code {code} {name}]" if code is not None else "error"
    stderr_console().print(Text(f"{prefix}: {message}", style="red"), soft_wrap=True)
    if state.json:
        error: dict[str, Any] = {"message": message, "exit_code": exit_code}
        if code is not None:
            error.update(code=code, name=name)
        print_json({"error": error})


def print_traceback(state: State) -> None:
    """With --debug: the current exception's traceback on stderr, secrets scrubbed."""
    if state.debug:
        sys.stderr.write(scrub(traceback.format_exc(), state.secrets()))


@contextlib.contextmanager
def running(ctx: typer.Context) -> Iterator[State]:
    """Run a command body: map every failure to its message and exit code, then disconnect."""
    from lance_namespace.errors import InternalError, LanceNamespaceError

    from .hms_local import MetastoreError

    state = _state(ctx)
    try:
        yield state
    except (typer.Exit, typer.Abort, typer.TyperException):
        raise
    except LanceNamespaceError as error:
        code = int(error.code)
        exit_code = EXIT_SPEC_BASE + code
        print_traceback(state)
        report_error(state, str(error), exit_code, code, error_code_name(code))
        raise typer.Exit(exit_code) from None
    except ConfigError as error:
        report_error(state, str(error), EXIT_USAGE, None, None)
        raise typer.Exit(EXIT_USAGE) from None
    except CliFailure as error:
        report_error(state, str(error), error.exit_code, None, None)
        raise typer.Exit(error.exit_code) from None
    except (MetastoreError, FileNotFoundError) as error:
        report_error(state, str(error), EXIT_FAILURE, None, None)
        raise typer.Exit(EXIT_FAILURE) from None
    except KeyboardInterrupt:
        report_error(state, "interrupted", EXIT_INTERRUPTED, None, None)
        raise typer.Exit(EXIT_INTERRUPTED) from None
    except Exception as error:
        print_traceback(state)
        code = int(InternalError.code)
        exit_code = EXIT_SPEC_BASE + code
        message = f"unexpected {type(error).__name__}: {error}"
        report_error(state, message, exit_code, code, error_code_name(code))
        raise typer.Exit(exit_code) from None
    finally:
        state.close()


def use_json(state: State, local: bool) -> bool:
    state.json = state.json or local
    return state.json


def mask_storage_options(options: dict[str, str] | None) -> dict[str, str]:
    return {k: ("***" if looks_secret(k) else v) for k, v in sorted((options or {}).items())}


def kv_table(title: str | None, rows: Sequence[tuple[str, Any]]) -> Table:
    table = Table(title=title, show_header=False, box=None, pad_edge=False, title_justify="left")
    table.add_column(style="bold", no_wrap=True)
    table.add_column(overflow="fold")
    for key, value in rows:
        table.add_row(Text(str(key)), Text("" if value is None else str(value)))
    return table


def properties_table(properties: dict[str, str] | None, title: str = "properties") -> Table:
    table = Table(title=title, title_justify="left", show_lines=False)
    table.add_column("key", no_wrap=True)
    table.add_column("value", overflow="fold")
    for key, value in sorted((properties or {}).items()):
        table.add_row(Text(key), Text(str(value)))
    return table


def show_progress(state: State, console: Console) -> bool:
    """Progress goes to stderr, only for humans: not with --json, not into pipes and files."""
    return not state.json and console.is_terminal


def print_properties(out: Console, properties: dict[str, str] | None, title: str) -> None:
    if properties:
        out.print(properties_table(properties, title))
    else:
        out.print(Text(f"no {title}", style="dim"))


@contextlib.contextmanager
def spinner(state: State, description: str) -> Iterator[Callable[[str], None]]:
    """A transient spinner on stderr (nothing in --json mode); yields a description setter."""
    console = stderr_console()
    if not show_progress(state, console):
        yield lambda _text: None
        return
    progress = Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )
    with progress:
        task = progress.add_task(description, total=None)
        yield lambda text: progress.update(task, description=text)


# --------------------------------------------------------------------------------------------
# The app and its global options
# --------------------------------------------------------------------------------------------

app = typer.Typer(
    name="lance-metastore",
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
hms_app = typer.Typer(
    help="A local Hive Metastore (from the pyspark wheel) for development.",
    no_args_is_help=True,
)
app.add_typer(hms_app, name="hms")

JsonFlag = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")]
PropList = Annotated[
    list[str] | None,
    typer.Option("--prop", "-p", metavar="KEY=VALUE", help="Property (repeatable)."),
]


@app.callback()
def main_callback(
    ctx: typer.Context,
    impl: Annotated[
        str | None,
        typer.Option(
            "--impl",
            metavar="IMPL",
            help="glue, hive3, hive2 or a class path [env LANCE_METASTORE_IMPL]",
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


# --------------------------------------------------------------------------------------------
# config
# --------------------------------------------------------------------------------------------


@app.command("config")
def config_command(ctx: typer.Context, json_flag: JsonFlag = False) -> None:
    """Show the effective impl and properties and where each comes from (secrets masked)."""
    with running(ctx) as state:
        use_json(state, json_flag)
        resolved = state.resolved()
        public = resolved.public_properties()
        document = {
            "impl": resolved.impl,
            "impl_source": resolved.impl_source,
            "profile": resolved.profile,
            "config_file": str(resolved.config_path) if resolved.config_path else None,
            "properties": {
                key: {"value": value, "source": resolved.sources.get(key)}
                for key, value in public.items()
            },
        }
        if state.json:
            print_json(document)
            return
        out = stdout_console()
        out.print(
            kv_table(
                None,
                [
                    ("impl", f"{resolved.impl} ({resolved.impl_source})" if resolved.impl else "-"),
                    ("profile", resolved.profile or "-"),
                    ("config file", resolved.config_path or "-"),
                ],
            )
        )
        table = Table(title="properties", title_justify="left")
        table.add_column("key", no_wrap=True)
        table.add_column("value", overflow="fold")
        table.add_column("source")
        for key, value in public.items():
            table.add_row(Text(key), Text(value), Text(resolved.sources.get(key, "")))
        out.print(table)


# --------------------------------------------------------------------------------------------
# ls
# --------------------------------------------------------------------------------------------


@dataclass
class Node:
    path: list[str]
    namespaces: list[Node] | None = None
    tables: list[str] | None = None

    def to_json(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "name": self.path[-1] if self.path else "",
            "id": list(self.path),
        }
        if self.namespaces is not None:
            document["namespaces"] = [child.to_json() for child in self.namespaces]
        if self.tables is not None:
            document["tables"] = list(self.tables)
        return document


def list_all(
    ns: Any,
    kind: str,
    path: list[str],
    page_size: int,
    on_page: Callable[[int], None],
) -> list[str]:
    """Every name of a listing, page by page (``limit`` and ``page_token``)."""
    from lance_namespace import ListNamespacesRequest, ListTablesRequest

    names: list[str] = []
    token: str | None = None
    seen: set[str] = set()
    while True:
        if kind == "namespaces":
            response = ns.list_namespaces(
                ListNamespacesRequest(id=list(path), limit=page_size, page_token=token)
            )
            page = response.namespaces
        else:
            response = ns.list_tables(
                ListTablesRequest(id=list(path), limit=page_size, page_token=token)
            )
            page = response.tables
        names.extend(page or [])
        on_page(len(names))
        token = response.page_token
        if not token or token in seen:
            return names
        seen.add(token)


def build_tree(
    ns: Any,
    state: State,
    path: list[str],
    recursive: bool,
    page_size: int,
) -> Node:
    from lance_namespace.errors import (
        InvalidInputError,
        NamespaceNotFoundError,
        UnsupportedOperationError,
    )

    counts = {"namespaces": 0, "tables": 0}

    with spinner(state, "listing") as describe:

        def progress(kind: str, where: list[str]) -> Callable[[int], None]:
            base = counts[kind]

            def update(n: int) -> None:
                label = join_id(where) or "(root)"
                describe(f"listing {kind} of {label}: {n}")
                counts[kind] = base + n

            return update

        def expand(node: Node, top: bool) -> None:
            try:
                children = list_all(
                    ns, "namespaces", node.path, page_size, progress("namespaces", node.path)
                )
            except (InvalidInputError, UnsupportedOperationError):
                if top and not node.path:
                    raise
                children = []  # e.g. a database, which holds no namespaces
            node.namespaces = [Node([*node.path, name]) for name in children]
            if node.path:
                try:
                    node.tables = list_all(
                        ns, "tables", node.path, page_size, progress("tables", node.path)
                    )
                except (InvalidInputError, UnsupportedOperationError):
                    if top and not node.namespaces:
                        raise
                    node.tables = []  # e.g. a catalog, which holds no tables
            if recursive:
                for child in node.namespaces:
                    try:
                        expand(child, top=False)
                    except NamespaceNotFoundError:
                        # Dropped while we were listing: show it as it was, unexpanded.
                        child.namespaces = child.tables = None

        root = Node(list(path))
        expand(root, top=True)
    return root


def render_tree(node: Node, label: str) -> Tree:
    tree = Tree(Text(label, style="bold"))

    def add(branch: Tree, current: Node) -> None:
        for child in current.namespaces or []:
            sub = branch.add(Text(f"{child.path[-1]}/", style="bold blue"))
            add(sub, child)
        for table in current.tables or []:
            branch.add(Text(table))

    add(tree, node)
    return tree


def count_tree(node: Node) -> tuple[int, int]:
    namespaces = len(node.namespaces or [])
    tables = len(node.tables or [])
    for child in node.namespaces or []:
        n, t = count_tree(child)
        namespaces, tables = namespaces + n, tables + t
    return namespaces, tables


@app.command("ls")
def ls_command(
    ctx: typer.Context,
    namespace: Annotated[
        str | None,
        typer.Argument(metavar="NAMESPACE", help="Namespace to list (default: the root)"),
    ] = None,
    recursive: Annotated[
        bool, typer.Option("--recursive", "-r", help="Descend into every namespace.")
    ] = False,
    page_size: Annotated[
        int, typer.Option("--page-size", metavar="N", min=1, help="Names fetched per call.")
    ] = DEFAULT_PAGE_SIZE,
    json_flag: JsonFlag = False,
) -> None:
    """List namespaces and Lance tables as a tree."""
    with running(ctx) as state:
        use_json(state, json_flag)
        ns = state.namespace()
        path = parse_id(namespace)
        tree = build_tree(ns, state, path, recursive, page_size)
        if state.json:
            print_json(tree.to_json())
            return
        label = join_id(path) or f"(root) {ns.namespace_id()}"
        out = stdout_console()
        out.print(render_tree(tree, label))
        namespaces, tables = count_tree(tree)
        out.print(Text(f"{namespaces} namespace(s), {tables} table(s)", style="dim"))


# --------------------------------------------------------------------------------------------
# describe
# --------------------------------------------------------------------------------------------


def _syntax(ns: Any, parts: list[str]) -> tuple[bool, bool]:
    """Whether ``parts`` is well-formed as (a table id, a namespace id) for this backend."""
    from lance_namespace.errors import LanceNamespaceError

    table_check = getattr(ns, "_table_path", None)
    namespace_check = getattr(ns, "_namespace_path", None)
    if table_check is None or namespace_check is None:
        return len(parts) >= 2, True
    results = []
    for check in (table_check, namespace_check):
        try:
            check(list(parts))
            results.append(True)
        except LanceNamespaceError:
            results.append(False)
    return results[0], results[1]


def describe_table_doc(ns: Any, parts: list[str]) -> dict[str, Any]:
    from lance_namespace import DescribeTableRequest

    response = ns.describe_table(DescribeTableRequest(id=list(parts), check_declared=True))
    namespace = list(response.namespace or parts[:-1])
    table = response.table or parts[-1]
    return {
        "kind": "table",
        "id": [*namespace, table],
        "namespace": namespace,
        "table": table,
        "location": response.location,
        "declared_only": response.is_only_declared,
        "managed_versioning": response.managed_versioning,
        "properties": dict(response.properties or {}),
        "storage_options": mask_storage_options(response.storage_options),
    }


def describe_namespace_doc(ns: Any, parts: list[str]) -> dict[str, Any]:
    from lance_namespace import DescribeNamespaceRequest

    response = ns.describe_namespace(DescribeNamespaceRequest(id=list(parts)))
    return {"kind": "namespace", "id": list(parts), "properties": dict(response.properties or {})}


@app.command("describe")
def describe_command(
    ctx: typer.Context,
    identifier: Annotated[str, typer.Argument(metavar="NAMESPACE|TABLE")],
    table: Annotated[bool, typer.Option("--table", "-t", help="Describe a table.")] = False,
    namespace: Annotated[bool, typer.Option("--namespace", "-n", help="A namespace.")] = False,
    json_flag: JsonFlag = False,
) -> None:
    """Describe a namespace or a table (tried as a table first when it could be either)."""
    from lance_namespace.errors import NamespaceNotFoundError, TableNotFoundError

    with running(ctx) as state:
        use_json(state, json_flag)
        if table and namespace:
            raise ConfigError("--table and --namespace exclude each other")
        ns = state.namespace()
        parts = parse_id(identifier)
        if table:
            document = describe_table_doc(ns, parts)
        elif namespace or not parts:
            document = describe_namespace_doc(ns, parts)
        else:
            as_table, as_namespace = _syntax(ns, parts)
            if as_namespace and not as_table:
                document = describe_namespace_doc(ns, parts)
            elif as_table and not as_namespace:
                document = describe_table_doc(ns, parts)
            elif not as_table:  # malformed either way: let the likelier reading say why
                describe = describe_table_doc if len(parts) >= 2 else describe_namespace_doc
                document = describe(ns, parts)
            else:
                try:
                    document = describe_table_doc(ns, parts)
                except (TableNotFoundError, NamespaceNotFoundError) as table_error:
                    try:
                        document = describe_namespace_doc(ns, parts)
                    except NamespaceNotFoundError:
                        raise table_error from None
        if state.json:
            print_json(document)
            return
        out = stdout_console()
        if document["kind"] == "table":
            declared = document["declared_only"]
            out.print(
                kv_table(
                    None,
                    [
                        ("table", join_id(document["id"])),
                        ("location", document["location"]),
                        (
                            "data",
                            "none yet (declared only)" if declared else "present",
                        ),
                        ("managed versioning", document["managed_versioning"]),
                    ],
                )
            )
            print_properties(out, document["properties"], "properties")
            if document["storage_options"]:
                print_properties(out, document["storage_options"], "storage options")
        else:
            out.print(kv_table(None, [("namespace", join_id(parts) or "(root)")]))
            print_properties(out, document["properties"], "properties")


# --------------------------------------------------------------------------------------------
# Namespace commands
# --------------------------------------------------------------------------------------------


class CreateMode(str, Enum):
    create = "create"
    exist_ok = "exist_ok"
    overwrite = "overwrite"


_SPEC_CREATE_MODE = {"create": "Create", "exist_ok": "ExistOk", "overwrite": "Overwrite"}


@app.command("create-namespace")
def create_namespace_command(
    ctx: typer.Context,
    identifier: Annotated[str, typer.Argument(metavar="ID")],
    prop: PropList = None,
    mode: Annotated[
        CreateMode, typer.Option("--mode", case_sensitive=False, help="What if it exists.")
    ] = CreateMode.create,
    json_flag: JsonFlag = False,
) -> None:
    """Create a namespace (a Glue database or catalog, a Hive database or catalog)."""
    from lance_namespace import CreateNamespaceRequest

    with running(ctx) as state:
        use_json(state, json_flag)
        properties = parse_assignments(prop or [])
        parts = parse_id(identifier)
        response = state.namespace().create_namespace(
            CreateNamespaceRequest(
                id=parts, mode=_SPEC_CREATE_MODE[mode.value], properties=properties or None
            )
        )
        document = {"id": parts, "mode": mode.value, "properties": dict(response.properties or {})}
        if state.json:
            print_json(document)
            return
        out = stdout_console()
        out.print(Text(f"namespace {join_id(parts)} ready ({mode.value})"))
        if document["properties"]:
            out.print(properties_table(document["properties"]))


@app.command("drop-namespace")
def drop_namespace_command(
    ctx: typer.Context,
    identifier: Annotated[str, typer.Argument(metavar="ID")],
    cascade: Annotated[
        bool,
        typer.Option("--cascade", help="Deregister its tables first (Hive; data stays)."),
    ] = False,
    skip_missing: Annotated[
        bool, typer.Option("--skip-missing", help="Succeed if it does not exist.")
    ] = False,
    json_flag: JsonFlag = False,
) -> None:
    """Drop a namespace (it must be empty unless --cascade)."""
    from lance_namespace import DropNamespaceRequest

    with running(ctx) as state:
        use_json(state, json_flag)
        parts = parse_id(identifier)
        state.namespace().drop_namespace(
            DropNamespaceRequest(
                id=parts,
                mode="Skip" if skip_missing else "Fail",
                behavior="Cascade" if cascade else "Restrict",
            )
        )
        if state.json:
            print_json({"id": parts, "dropped": True})
            return
        stdout_console().print(Text(f"namespace {join_id(parts)} dropped"))


# --------------------------------------------------------------------------------------------
# Table commands
# --------------------------------------------------------------------------------------------


def absolute_location(location: str) -> str:
    """URIs are kept; a local path becomes absolute (the catalog must not depend on a cwd)."""
    if "://" in location:
        return location
    return os.path.abspath(os.path.expanduser(location))


@app.command("declare")
def declare_command(
    ctx: typer.Context,
    identifier: Annotated[str, typer.Argument(metavar="TABLE")],
    location: Annotated[
        str | None,
        typer.Option(
            "--location", "-l", metavar="LOCATION", help="Table root (default: under root)."
        ),
    ] = None,
    prop: PropList = None,
    json_flag: JsonFlag = False,
) -> None:
    """Declare a table: a catalog entry whose data Lance writes later."""
    from lance_namespace import DeclareTableRequest

    with running(ctx) as state:
        use_json(state, json_flag)
        parts = parse_id(identifier)
        response = state.namespace().declare_table(
            DeclareTableRequest(
                id=parts,
                location=absolute_location(location) if location else None,
                properties=parse_assignments(prop or []) or None,
            )
        )
        document = {
            "id": parts,
            "location": response.location,
            "properties": dict(response.properties or {}),
        }
        if state.json:
            print_json(document)
            return
        stdout_console().print(Text(f"declared {join_id(parts)} at {response.location}"))


class RegisterMode(str, Enum):
    create = "create"
    overwrite = "overwrite"


@app.command("register")
def register_command(
    ctx: typer.Context,
    identifier: Annotated[str, typer.Argument(metavar="TABLE")],
    location: Annotated[str, typer.Argument(metavar="LOCATION")],
    prop: PropList = None,
    mode: Annotated[
        RegisterMode,
        typer.Option("--mode", case_sensitive=False, help="overwrite re-points an entry."),
    ] = RegisterMode.create,
    json_flag: JsonFlag = False,
) -> None:
    """Register an existing Lance dataset as a table."""
    from lance_namespace import RegisterTableRequest

    with running(ctx) as state:
        use_json(state, json_flag)
        parts = parse_id(identifier)
        response = state.namespace().register_table(
            RegisterTableRequest(
                id=parts,
                location=absolute_location(location),
                mode="Overwrite" if mode is RegisterMode.overwrite else "Create",
                properties=parse_assignments(prop or []) or None,
            )
        )
        document = {
            "id": parts,
            "location": response.location,
            "properties": dict(response.properties or {}),
        }
        if state.json:
            print_json(document)
            return
        stdout_console().print(Text(f"registered {join_id(parts)} at {response.location}"))


def find_datasets(directory: Path) -> list[Path]:
    """Every Lance dataset under ``directory`` (a directory with ``_versions``), not nested."""
    found: list[Path] = []
    for current, dirnames, _files in os.walk(directory, followlinks=False):
        if "_versions" in dirnames:
            found.append(Path(current))
            dirnames[:] = []  # a dataset's own directories hold no further datasets
        else:
            dirnames.sort()
    return sorted(found)


def table_name_for(dataset: Path) -> str:
    name = dataset.name
    return name[: -len(".lance")] if name.endswith(".lance") and len(name) > 6 else name


@app.command("register-many")
def register_many_command(
    ctx: typer.Context,
    namespace: Annotated[str, typer.Argument(metavar="NAMESPACE")],
    directory: Annotated[
        Path,
        typer.Argument(
            metavar="DIR", exists=True, file_okay=False, dir_okay=True, resolve_path=True
        ),
    ],
    prop: PropList = None,
    skip_existing: Annotated[
        bool,
        typer.Option("--skip-existing", help="Leave tables that are already registered."),
    ] = False,
    jobs: Annotated[
        int, typer.Option("--jobs", "-j", metavar="N", min=1, help="Parallel registrations.")
    ] = 4,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Only show what would be registered.")
    ] = False,
    json_flag: JsonFlag = False,
) -> None:
    """Register every Lance dataset found under DIR (table name: directory minus .lance)."""
    from lance_namespace import RegisterTableRequest
    from lance_namespace.errors import LanceNamespaceError, TableAlreadyExistsError

    with running(ctx) as state:
        use_json(state, json_flag)
        ns_parts = parse_id(namespace)
        properties = parse_assignments(prop or []) or None
        datasets = find_datasets(directory)
        plan = [(table_name_for(d), str(d)) for d in datasets]
        ns = state.namespace()
        registered: list[dict[str, Any]] = []
        skipped: list[dict[str, Any]] = []
        failed: list[dict[str, Any]] = []
        first_error: LanceNamespaceError | None = None

        def register(item: tuple[str, str]) -> tuple[str, str, BaseException | None]:
            name, location = item
            try:
                ns.register_table(
                    RegisterTableRequest(
                        id=[*ns_parts, name], location=location, properties=properties
                    )
                )
            except Exception as error:
                return name, location, error
            return name, location, None

        if not dry_run and plan:
            # Fail fast on a missing namespace instead of once per dataset.
            from lance_namespace import NamespaceExistsRequest

            ns.namespace_exists(NamespaceExistsRequest(id=ns_parts))
            console = stderr_console()
            progress = Progress(
                TextColumn("registering"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=console,
                transient=True,
                disable=not show_progress(state, console),
            )
            with progress, ThreadPoolExecutor(max_workers=jobs) as pool:
                task = progress.add_task("registering", total=len(plan))
                for name, location, error in pool.map(register, plan):
                    progress.advance(task)
                    entry = {"table": name, "id": [*ns_parts, name], "location": location}
                    if error is None:
                        registered.append(entry)
                    elif skip_existing and isinstance(error, TableAlreadyExistsError):
                        skipped.append(entry)
                    else:
                        if not isinstance(error, LanceNamespaceError):
                            from lance_namespace.errors import InternalError

                            error = InternalError(f"{type(error).__name__}: {error}")
                        code = int(error.code)
                        message = scrub(str(error), state.secrets())
                        failed.append(
                            {**entry, "code": code, "name": error_code_name(code), "error": message}
                        )
                        first_error = first_error or error
        document = {
            "namespace": ns_parts,
            "directory": str(directory),
            "found": len(plan),
            "dry_run": dry_run,
            "registered": registered,
            "skipped": skipped,
            "failed": failed,
        }
        if dry_run:
            document["would_register"] = [
                {"table": name, "id": [*ns_parts, name], "location": location}
                for name, location in plan
            ]
        if state.json:
            print_json(document)
        else:
            out = stdout_console()
            table = Table(title=f"{len(plan)} dataset(s) under {directory}", title_justify="left")
            table.add_column("table", no_wrap=True)
            table.add_column("status")
            table.add_column("location", overflow="fold")
            rows = (
                [(e, "would register") for e in document["would_register"]]
                if dry_run
                else [(e, "registered") for e in registered]
                + [(e, "skipped (exists)") for e in skipped]
                + [(e, f"failed: {e['error']}") for e in failed]
            )
            for entry, status in sorted(rows, key=lambda r: r[0]["table"]):
                table.add_row(Text(join_id(entry["id"])), Text(status), Text(entry["location"]))
            out.print(table)
        if first_error is not None:
            code = int(first_error.code)
            exit_code = EXIT_SPEC_BASE + code
            message = f"{len(failed)} of {len(plan)} registration(s) failed; first: {first_error}"
            message = scrub(message, state.secrets())
            prefix = f"error [code {code} {error_code_name(code)}]"
            stderr_console().print(Text(f"{prefix}: {message}", style="red"), soft_wrap=True)
            raise typer.Exit(exit_code)


@app.command("deregister")
def deregister_command(
    ctx: typer.Context,
    identifier: Annotated[str, typer.Argument(metavar="TABLE")],
    json_flag: JsonFlag = False,
) -> None:
    """Remove a table's catalog entry; its data stays where it is."""
    from lance_namespace import DeregisterTableRequest

    with running(ctx) as state:
        use_json(state, json_flag)
        parts = parse_id(identifier)
        response = state.namespace().deregister_table(DeregisterTableRequest(id=parts))
        document = {"id": list(response.id or parts), "location": response.location}
        if state.json:
            print_json(document)
            return
        stdout_console().print(
            Text(f"deregistered {join_id(parts)} (data kept at {response.location})")
        )


@app.command("drop-table")
def drop_table_command(
    ctx: typer.Context,
    identifier: Annotated[str, typer.Argument(metavar="TABLE")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    json_flag: JsonFlag = False,
) -> None:
    """Drop a table: its catalog entry AND its data (asks first unless --yes)."""
    from lance_namespace import DescribeTableRequest, DropTableRequest

    with running(ctx) as state:
        use_json(state, json_flag)
        parts = parse_id(identifier)
        ns = state.namespace()
        if not yes:
            described = ns.describe_table(DescribeTableRequest(id=parts))
            confirmed = typer.confirm(
                f"Drop table {join_id(parts)} and DELETE its data at {described.location}?",
                default=False,
                err=True,
            )
            if not confirmed:
                raise CliFailure("aborted: nothing was dropped")
        response = ns.drop_table(DropTableRequest(id=parts))
        document = {"id": list(response.id or parts), "location": response.location}
        if state.json:
            print_json(document)
            return
        stdout_console().print(Text(f"dropped {join_id(parts)} and its data"))


@app.command("versions")
def versions_command(
    ctx: typer.Context,
    identifier: Annotated[str, typer.Argument(metavar="TABLE")],
    json_flag: JsonFlag = False,
) -> None:
    """List the versions of a table's Lance dataset (opened through the namespace)."""
    from lance_namespace import DescribeTableRequest

    with running(ctx) as state:
        use_json(state, json_flag)
        parts = parse_id(identifier)
        ns = state.namespace()
        # Describing first gives the catalog's own errors (codes) and finds declared tables.
        described = ns.describe_table(DescribeTableRequest(id=parts, check_declared=True))
        versions: list[dict[str, Any]] = []
        if not described.is_only_declared:
            import lance

            dataset = lance.dataset(namespace_client=ns, table_id=list(parts))
            for item in dataset.versions():
                versions.append(
                    {
                        "version": int(item["version"]),
                        "timestamp": item.get("timestamp"),
                        "metadata": dict(item.get("metadata") or {}),
                    }
                )
        document = {"id": parts, "location": described.location, "versions": versions}
        if state.json:
            print_json(document)
            return
        out = stdout_console()
        table = Table(title=f"{join_id(parts)} at {described.location}", title_justify="left")
        table.add_column("version", justify="right")
        table.add_column("timestamp")
        table.add_column("rows", justify="right")
        table.add_column("fragments", justify="right")
        for item in versions:
            timestamp = item["timestamp"]
            table.add_row(
                str(item["version"]),
                timestamp.isoformat(sep=" ", timespec="seconds")
                if isinstance(timestamp, _dt.datetime)
                else str(timestamp or ""),
                str(item["metadata"].get("total_rows", "")),
                str(item["metadata"].get("total_fragments", "")),
            )
        out.print(table)
        if not versions:
            out.print(Text("no versions: the table is declared but has no data yet", style="dim"))


# --------------------------------------------------------------------------------------------
# hms
# --------------------------------------------------------------------------------------------

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
    exist_ok: Annotated[
        bool, typer.Option("--exist-ok", help="Succeed if it already runs there.")
    ] = False,
    json_flag: JsonFlag = False,
) -> None:
    """Start a local Hive Metastore in the background and print its thrift:// uri."""
    from .hms_local import LocalMetastore, MetastoreAlreadyRunningError

    with running(ctx) as state:
        use_json(state, json_flag)
        directory = hms_data_dir(data_dir)
        try:
            metastore = LocalMetastore.from_data_dir(directory)
            if port and metastore.port != port and not metastore.is_running():
                metastore = LocalMetastore(directory, port=port)
        except FileNotFoundError:
            metastore = LocalMetastore(directory, port=port)
        already = False
        try:
            with spinner(state, f"starting the metastore in {directory}"):
                metastore.start()
        except MetastoreAlreadyRunningError:
            if not exist_ok:
                raise
            metastore = LocalMetastore.from_data_dir(directory)
            already = True
        document = {**status_document(metastore.status()), "already_running": already}
        if state.json:
            print_json(document)
            return
        if already:
            stderr_console().print(Text(f"already running in {directory}"))
        print(document["uri"])


@hms_app.command("status")
def hms_status(
    ctx: typer.Context,
    data_dir: DataDirOption = None,
    json_flag: JsonFlag = False,
) -> None:
    """Whether the local metastore runs (exit 0) or not (exit 3), and its uri."""
    from .hms_local import LocalMetastore

    with running(ctx) as state:
        use_json(state, json_flag)
        directory = hms_data_dir(data_dir)
        try:
            document = status_document(LocalMetastore.from_data_dir(directory).status())
        except FileNotFoundError:
            document = {
                "running": False,
                "uri": None,
                "pid": None,
                "port": None,
                "data_dir": str(directory),
                "log": None,
            }
        if state.json:
            print_json(document)
        elif document["running"]:
            print(f"running {document['uri']} (pid {document['pid']}, data {directory})")
        else:
            last = f" (last uri {document['uri']})" if document["uri"] else ""
            print(f"stopped{last}, data {directory}")
        if not document["running"]:
            raise typer.Exit(EXIT_NOT_RUNNING)


@hms_app.command("stop")
def hms_stop(
    ctx: typer.Context,
    data_dir: DataDirOption = None,
    json_flag: JsonFlag = False,
) -> None:
    """Stop the local metastore of a data directory (no-op if it is not running)."""
    from .hms_local import LocalMetastore

    with running(ctx) as state:
        use_json(state, json_flag)
        directory = hms_data_dir(data_dir)
        metastore = LocalMetastore.from_data_dir(directory)
        was_running = metastore.status().process_alive
        with spinner(state, "stopping the metastore"):
            metastore.stop()
        document = {"stopped": True, "was_running": was_running, "data_dir": str(directory)}
        if state.json:
            print_json(document)
            return
        print("stopped" if was_running else "was not running")


# --------------------------------------------------------------------------------------------
# serve
# --------------------------------------------------------------------------------------------


@app.command("serve")
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
    from .rest import read_token_file, serve

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


# --------------------------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> None:
    """Console-script entry point (``lance-metastore``)."""
    app(args=list(argv) if argv is not None else None, prog_name="lance-metastore")


if __name__ == "__main__":
    main()
