"""Data source options -> where the table is and how to reach it.

Spark passes every option as a string in a case-insensitive dict (keys arrive lower-cased;
values keep their case). Two ways to name a table:

- ``impl`` set: the path given to ``load``/``save`` (the ``path`` option) is a table id,
  ``$``-joined (option ``delimiter`` changes that), and every option that is not one of the
  data source's own (:data:`SOURCE_OPTIONS`) is a property of the namespace
  (``uri``, ``root``, ``region``, ``storage.aws_endpoint``, ...).
- ``profile`` set: as with ``impl``, and the settings are resolved as ``lance-metastore
  --profile`` resolves them (:mod:`lance_metastore.rules.profiles`): the options win over the
  ``LANCE_METASTORE_*`` environment, which wins over the profile; ``impl`` may come from the
  profile. Option ``config`` names the config file.
- no ``impl``: the path is a Lance dataset URI, read and written with no catalog; the
  ``storage.*`` options are Lance storage options.

Everything here runs on the driver, in the Python workers Spark starts to plan a read or a
write; executors receive only the resolved :class:`ResolvedTable`.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..impls import connect as connect_namespace
from ..rules.config import boolean, positive_int
from ..rules.identifiers import DELIMITER, join_identifier, parse_identifier
from ..rules.redaction import STORAGE_PREFIX, VENDED_CREDENTIALS_MARKER

if TYPE_CHECKING:
    from lance_namespace import LanceNamespace

# The data source's own options; all others go to the namespace.
SOURCE_OPTIONS = frozenset(
    {
        "impl",
        "profile",
        "config",
        "path",
        "delimiter",
        "version",
        "as_of",
        "columns",
        "save_mode",
        "pushdown",
        "rows_per_partition",
        "partitions",
        "batch_size",
        "max_rows_per_file",
        "max_rows_per_group",
        "data_storage_version",
        "compression",
        "batch_size_bytes",
        "row_address",
        "mergeschema",
        # streaming
        "checkpointlocation",
        "query_id",
        "replay_lookback",
        "starting_version",
    }
)

SQL_TABLE_HINT = (
    "Spark does not pass OPTIONS of a catalog table (CREATE TABLE ... USING lance, CTAS, "
    "saveAsTable) to a Python data source, so such a table cannot find its data. Use "
    "spark.read/df.write with .format('lance').option(...), or "
    "CREATE TEMPORARY VIEW <name> USING lance OPTIONS (impl '...', path '<db>$<table>', ...), "
    "which supports SELECT, INSERT INTO and INSERT OVERWRITE."
)


class OptionError(ValueError):
    """Options that do not name a table, or name it in a way we cannot use."""


@dataclass(frozen=True)
class ResolvedTable:
    """A resolved table: where its dataset is and how to open it (picklable, secret-bearing).

    Not a location value: ``uri`` is text handed to Lance as it is, the catalog's answer
    (already the canonical form of :class:`lance_metastore.rules.locations.Location`) or the
    dataset path the Spark options name. What judges or compares a location parses ``uri``
    with that one parser (``fragments.remove_empty_local_dirs``)."""

    uri: str
    # repr=False: these carry credentials, and reprs end up in Spark's logs.
    storage_options: dict[str, str] | None = field(default=None, repr=False)
    impl: str | None = None
    properties: dict[str, str] = field(default_factory=dict, repr=False)
    table_id: tuple[str, ...] | None = None
    managed_versioning: bool = False

    @property
    def name(self) -> str:
        """How messages name the table (never with secrets)."""
        if self.table_id is not None:
            return join_identifier(self.table_id)
        return self.uri

    def namespace(self) -> Any:
        """A fresh namespace client of the table's catalog (None for a plain dataset)."""
        if self.impl is None:
            return None
        return connect(self.impl, self.properties)

    @property
    def vended(self) -> bool:
        """Whether the catalog vended these storage options (short-lived, per caller)."""
        return self.table_id is not None and VENDED_CREDENTIALS_MARKER in (
            self.storage_options or {}
        )

    # Vended credentials never travel to executors: each process asks the catalog for its own
    # (with the catalog client's properties, e.g. the REST server's URL and token), so they
    # are fresh for every task and Lance can refresh them (see reader.open_dataset).
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        if self.vended:
            state["storage_options"] = None
            state["_vend_again"] = True
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        vend_again = state.pop("_vend_again", False)
        for name, value in state.items():
            object.__setattr__(self, name, value)
        if vend_again:
            from lance_namespace import DescribeTableRequest

            request = DescribeTableRequest(id=list(self.table_id or ()), vend_credentials=True)
            answer = self.namespace().describe_table(request)
            object.__setattr__(self, "storage_options", dict(answer.storage_options or {}))


@dataclass(frozen=True)
class Target:
    """What the options name, before any catalog call."""

    path: str
    impl: str | None
    properties: dict[str, str] = field(repr=False)
    table_id: tuple[str, ...] | None = None
    storage_options: dict[str, str] | None = field(default=None, repr=False)

    @property
    def name(self) -> str:
        return join_identifier(self.table_id) if self.table_id is not None else self.path

    def namespace(self) -> Any:
        if self.impl is None:
            return None
        return connect(self.impl, self.properties)


_MAX_CLIENTS = 8
_CLIENTS: OrderedDict[tuple[str, tuple[tuple[str, str], ...]], LanceNamespace] = OrderedDict()
_CLIENTS_LOCK = threading.Lock()


def connect(impl: str, properties: Mapping[str, str]) -> LanceNamespace:
    """A namespace client, shared within this process for the same configuration.

    Spark reuses its Python workers, so planning one read after another in the same worker
    reuses the catalog connections (a Hive describe_table takes ~5 ms on an open connection,
    ~25 ms on a new one). The cache keeps the most recently used clients; one that falls out
    is never closed here, because a reader or writer may still hold it: it releases its
    connections when the last holder drops it (Python's reference count is the lease).
    Namespace clients reconnect by themselves when a connection dies.
    """
    key = (impl, tuple(sorted((str(k), str(v)) for k, v in properties.items())))
    with _CLIENTS_LOCK:
        client = _CLIENTS.get(key)
        if client is not None:
            _CLIENTS.move_to_end(key)
            return client
    client = connect_namespace(impl, dict(properties))  # outside the lock: may be slow
    with _CLIENTS_LOCK:
        # Another thread may have built one meanwhile: keep the first, so all share it.
        client = _CLIENTS.setdefault(key, client)
        _CLIENTS.move_to_end(key)
        while len(_CLIENTS) > _MAX_CLIENTS:
            _CLIENTS.popitem(last=False)  # the least recently used
    return client


def parse_target(options: Mapping[str, str]) -> Target:
    """The table the options name; raises :class:`OptionError` with a fix when they do not."""
    opts = {str(k).lower(): str(v) for k, v in dict(options).items()}
    if "provider" in opts:
        # Spark's session catalog creating a table (CREATE TABLE ... USING lance [OPTIONS |
        # LOCATION]): these are its table properties, and the reads and writes of that table
        # will receive no options at all.
        raise OptionError("CREATE TABLE ... USING lance is not supported. " + SQL_TABLE_HINT)
    path = opts.get("path", "").strip()
    impl = opts.get("impl", "").strip() or None
    if not path:
        if not {k for k in opts if not k.startswith("__")}:
            # No options at all: a spark_catalog table, whose OPTIONS Spark keeps to itself.
            raise OptionError(
                "No table given, and no options at all: this is either load()/save() without "
                "a path, or a spark_catalog table (CREATE TABLE ... USING lance with a column "
                "list, which Spark creates without asking the source). For such a table, "
                "DROP TABLE it. " + SQL_TABLE_HINT
            )
        raise OptionError(
            "No table given: pass a table id (with option 'impl') or a dataset URI to "
            "load()/save(), or set option 'path'. " + SQL_TABLE_HINT
        )
    extra = {k: v for k, v in opts.items() if k not in SOURCE_OPTIONS and not k.startswith("__")}
    profile = opts.get("profile", "").strip() or None
    if profile is not None:
        impl, extra = from_profile(profile, opts.get("config", "").strip() or None, impl, extra)
    if impl is None:
        from ..impls import impl_choices

        unknown = sorted(k for k in extra if not k.startswith(STORAGE_PREFIX))
        if unknown:
            raise OptionError(
                f"Unknown options {unknown} for a Lance dataset path {path!r}: without option "
                f"'impl' ({impl_choices()}) or 'profile' only storage.* options apply"
            )
        storage = {k[len(STORAGE_PREFIX) :]: v for k, v in extra.items()}
        return Target(path, None, {}, None, storage or None)
    check_impl(impl)
    table_id = parse_identifier(path, opts.get("delimiter") or DELIMITER)
    return Target(path, impl, extra, table_id, None)


def from_profile(
    profile: str, config: str | None, impl: str | None, options: dict[str, str]
) -> tuple[str, dict[str, str]]:
    """(impl, properties) of the options over the environment over the profile."""
    from ..impls import declared_properties, impl_choices
    from ..rules.profiles import ProfileError, resolve

    try:
        resolved = resolve(
            impl=impl,
            impl_source="option impl",
            properties=options,
            profile=profile,
            config=config,
            declared_properties=declared_properties,
        )
    except ProfileError as error:
        raise OptionError(f"Option 'profile': {error}") from None
    if not resolved.impl:
        raise OptionError(
            f"Option 'profile': profile {profile!r} sets no impl: set option 'impl' "
            f"({impl_choices()}) or impl in the profile"
        )
    return resolved.impl, resolved.properties


def check_impl(impl: str) -> None:
    """Refuse an ``impl`` that is neither a known alias nor a class path, naming the aliases
    (the rule is the core's: :func:`lance_metastore.impls.class_path_of`)."""
    from ..impls import UnknownImplError, class_path_of

    try:
        class_path_of(impl)
    except UnknownImplError as error:
        raise OptionError(f"Option 'impl': {error}") from None


def int_option(options: Mapping[str, str], name: str, default: int | None) -> int | None:
    raw = options.get(name)
    if raw is None or str(raw).strip() == "":
        return default
    try:
        return positive_int(raw)
    except ValueError as error:  # the namespaces' own rule, so both say the same thing
        raise OptionError(f"Option {name!r} {error}") from None


def bool_option(options: Mapping[str, str], name: str, default: bool) -> bool:
    raw = options.get(name)
    if raw is None or str(raw).strip() == "":
        return default
    try:
        return boolean(raw)
    except ValueError as error:
        raise OptionError(f"Option {name!r} {error}") from None
