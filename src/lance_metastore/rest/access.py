"""Who may do what on the REST server: privileges, the policy file, and the per-route decision.

A policy file grants principals privileges on namespace prefixes. Privileges are cumulative,
each including those before it: ``list`` (list and describe), ``read`` (the table's data and
history), ``write`` (change data, versions, tags, branches), ``create`` (create and drop
namespaces and tables), ``manage`` (change a table's definition: columns, metadata, indexes).
A grant on ``["sales"]`` covers ``sales`` and everything under it; a caller also sees the
namespaces on the way to a grant (to navigate), nothing else of them.

The decision depends on the policy alone, never on whether the object exists: a caller who may
not see an object's namespace gets the answer of a missing object (404), one who may see it
but not act gets 403 (code 15). :data:`OPERATION_PRIVILEGES` maps every spec operation once.
"""

from __future__ import annotations

import enum
import json
import logging
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from lance_namespace.errors import (
    ErrorCode,
    NamespaceNotFoundError,
    TableNotFoundError,
)

from ..rules.errors import LANCE_PHRASES
from ..rules.identifiers import describe
from .auth import Authenticator, Headers, InvalidCredentials, Principal

logger = logging.getLogger("lance_metastore.rest")

ANONYMOUS = Principal("anonymous", "none")
EVERYONE = "*"  # a policy entry for every principal, anonymous included


class Privilege(enum.IntEnum):
    """What a grant allows; each privilege includes the ones below it."""

    LIST = 1  # list and describe namespaces and tables
    READ = 2  # read a table's rows, versions, indexes, tags and branches
    WRITE = 3  # change a table's rows, versions, tags and branches
    CREATE = 4  # create and drop (register, deregister, rename) namespaces and tables
    MANAGE = 5  # change a table's definition: columns, metadata, indexes

    @classmethod
    def named(cls, name: str) -> Privilege:
        try:
            return cls[name.upper()]
        except KeyError:
            choices = ", ".join(p.name.lower() for p in cls)
            raise ValueError(f"Unknown privilege {name!r}: use one of {choices}") from None


class Target(enum.Enum):
    """What the route's id names, which decides how a denial answers."""

    NAMESPACE = "namespace"
    TABLE = "table"
    NONE = "none"  # no id in the route: the body or the answer names the tables


@dataclass(frozen=True)
class Rule:
    privilege: Privilege
    target: Target
    navigates: bool = False  # also allowed on the namespaces on the way to a grant


def _rules(privilege: Privilege, target: Target, *names: str) -> dict[str, Rule]:
    return dict.fromkeys(names, Rule(privilege, target))


P, NS, T = Privilege, Target.NAMESPACE, Target.TABLE
OPERATION_PRIVILEGES: dict[str, Rule] = {
    "list_namespaces": Rule(P.LIST, NS, navigates=True),
    "namespace_exists": Rule(P.LIST, NS, navigates=True),
    **_rules(P.LIST, NS, "describe_namespace", "list_tables"),
    **_rules(P.CREATE, NS, "create_namespace", "drop_namespace"),
    "list_all_tables": Rule(P.LIST, Target.NONE),
    **_rules(P.LIST, T, "describe_table", "table_exists"),
    **_rules(
        P.READ,
        T,
        "get_table_stats",
        "query_table",
        "count_table_rows",
        "explain_table_query_plan",
        "analyze_table_query_plan",
        "list_table_versions",
        "describe_table_version",
        "list_table_indices",
        "describe_table_index_stats",
        "list_table_tags",
        "get_table_tag_version",
        "list_table_branches",
        "describe_transaction",
    ),
    **_rules(
        P.WRITE,
        T,
        "insert_into_table",
        "merge_insert_into_table",
        "update_table",
        "delete_from_table",
        "alter_table_backfill_columns",
        "restore_table",
        "create_table_version",
        "batch_delete_table_versions",
        "create_table_tag",
        "delete_table_tag",
        "update_table_tag",
        "create_table_branch",
        "delete_table_branch",
        "refresh_materialized_view",
        "alter_transaction",
    ),
    "batch_create_table_versions": Rule(P.WRITE, Target.NONE),
    "batch_commit_tables": Rule(P.CREATE, Target.NONE),
    **_rules(
        P.CREATE,
        T,
        "create_table",
        "declare_table",
        "create_empty_table",
        "register_table",
        "deregister_table",
        "drop_table",
        "rename_table",
        "create_materialized_view",
    ),
    **_rules(
        P.MANAGE,
        T,
        "update_table_schema_metadata",
        "update_field_metadata",
        "alter_table_add_columns",
        "alter_table_alter_columns",
        "alter_table_drop_columns",
        "create_table_index",
        "create_table_scalar_index",
        "drop_table_index",
    ),
}

# What storage permission (Lance's credential_vendor.permission) each privilege allows.
STORAGE_PERMISSION: dict[Privilege | None, str] = {
    None: "none",
    P.LIST: "none",
    P.READ: "read",
    P.WRITE: "write",
    P.CREATE: "write",
    P.MANAGE: "admin",
}


@dataclass(frozen=True)
class Grant:
    principal: str
    prefix: tuple[str, ...]
    privilege: Privilege


class Policy:
    """The grants of a policy file, indexed by principal. ``None`` as a policy (no file) lets
    every authenticated caller do everything, as a single-token server always did."""

    def __init__(self, grants: Iterable[Grant]) -> None:
        self.grants: dict[str, list[Grant]] = {}
        for grant in grants:
            self.grants.setdefault(grant.principal, []).append(grant)

    @classmethod
    def from_file(cls, path: str) -> Policy:
        """A policy from a JSON file, or YAML (``.yaml``/``.yml``, needs PyYAML)::

        {"grants": [{"principal": "analyst", "namespace": ["sales"], "privilege": "read"}]}
        """
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        if path.endswith((".yaml", ".yml")):
            try:
                import yaml
            except ImportError:
                raise ValueError(
                    f"The policy file {path} is YAML, which needs PyYAML (pip install pyyaml); "
                    "or write it as JSON"
                ) from None
            try:
                content = yaml.safe_load(text)
            except yaml.YAMLError as error:
                raise ValueError(f"The policy file {path} does not parse: {error}") from None
        else:
            try:
                content = json.loads(text)
            except ValueError as error:
                raise ValueError(f"The policy file {path} does not parse: {error}") from None
        return cls(_grants_of(content, path))

    def privilege(self, principal: Principal, path: Sequence[str]) -> Privilege | None:
        """The highest privilege ``principal`` holds on ``path`` (None: none)."""
        best: Privilege | None = None
        for grant in self._grants_of(principal):
            covers = tuple(path[: len(grant.prefix)]) == grant.prefix
            if covers and (best is None or grant.privilege > best):
                best = grant.privilege
        return best

    def leads_to_grant(self, principal: Principal, path: Sequence[str]) -> bool:
        """Whether ``path`` is a namespace on the way to one of the principal's grants."""
        length = len(path)
        return any(
            len(grant.prefix) > length and grant.prefix[:length] == tuple(path)
            for grant in self._grants_of(principal)
        )

    def sees_namespace(self, principal: Principal, path: Sequence[str]) -> bool:
        return self.privilege(principal, path) is not None or self.leads_to_grant(principal, path)

    def _grants_of(self, principal: Principal) -> list[Grant]:
        return self.grants.get(principal.name, []) + self.grants.get(EVERYONE, [])


def _grants_of(content: Any, path: str) -> list[Grant]:
    entries = content.get("grants") if isinstance(content, dict) else None
    if not isinstance(entries, list):
        raise ValueError(f"The policy file {path} must hold an object with a list 'grants'")
    grants = []
    for number, entry in enumerate(entries, 1):
        where = f"The policy file {path}, grant {number}"
        if not isinstance(entry, dict) or set(entry) != {"principal", "namespace", "privilege"}:
            raise ValueError(f"{where}: needs exactly principal, namespace and privilege")
        principal, namespace = entry["principal"], entry["namespace"]
        if not isinstance(principal, str) or not principal:
            raise ValueError(f"{where}: principal must be a name (or {EVERYONE!r})")
        if not isinstance(namespace, list) or not all(isinstance(p, str) for p in namespace):
            raise ValueError(f"{where}: namespace must be a list of names ([] is the root)")
        try:
            privilege = Privilege.named(str(entry["privilege"]))
        except ValueError as error:
            raise ValueError(f"{where}: {error}") from None
        grants.append(Grant(principal, tuple(namespace), privilege))
    return grants


@dataclass(frozen=True)
class Denial:
    """A refused request: the status, the spec code and the message it answers."""

    status: int
    code: int
    message: str
    needed: str  # the privilege the caller lacked (for the audit line, never the answer)


class AccessControl:
    """The server's authentication schemes and policy, reloadable as one (SIGHUP).

    With no scheme every caller is ``anonymous``; with no policy file every admitted caller
    may do everything (the single-token server's behaviour).
    """

    def __init__(
        self, authenticators: Sequence[Authenticator] = (), policy_file: str | None = None
    ) -> None:
        self.authenticators = list(authenticators)
        self.policy_file = policy_file
        self.policy = Policy.from_file(policy_file) if policy_file else None
        self._reloading = threading.Lock()

    @property
    def authenticates(self) -> bool:
        """Whether callers must prove who they are (what ``--insecure``'s rule asks)."""
        return bool(self.authenticators)

    def reload(self) -> None:
        """Re-read every file; a file that fails keeps its old state and the error is logged."""
        with self._reloading:
            self._reload()

    def _reload(self) -> None:
        for authenticator in self.authenticators:
            try:
                authenticator.reload()
            except Exception as error:
                logger.error("reload of %r failed, keeping the old state: %s", authenticator, error)
        if self.policy_file:
            try:
                self.policy = Policy.from_file(self.policy_file)
            except (OSError, ValueError) as error:
                logger.error("reload of the policy file failed, keeping the old one: %s", error)
        logger.warning("reloaded the server's credentials and policy files")

    async def authenticate(self, headers: Headers) -> Principal:
        """The caller; raises :class:`InvalidCredentials` when no scheme admits it."""
        if not self.authenticators:
            return ANONYMOUS
        for authenticator in self.authenticators:
            principal = await authenticator.authenticate(headers)
            if principal is not None:
                return principal
        if b"authorization" in headers or b"x-api-key" in headers:
            raise InvalidCredentials("Invalid credentials")
        raise InvalidCredentials("Missing credentials")

    # -- decisions ---------------------------------------------------------------------------

    def privilege(self, principal: Principal, path: Sequence[str]) -> Privilege | None:
        if self.policy is None:
            return Privilege.MANAGE
        return self.policy.privilege(principal, path)

    def check(
        self, principal: Principal, operation: str, object_id: Sequence[str]
    ) -> Denial | None:
        """None when ``principal`` may run ``operation`` on ``object_id``, else the denial."""
        rule = OPERATION_PRIVILEGES[operation]
        held = self.privilege(principal, object_id)
        if held is not None and held >= rule.privilege:
            return None
        if self.policy is None:  # unreachable: without a policy everyone holds MANAGE
            return None
        if rule.navigates and self.policy.leads_to_grant(principal, object_id):
            return None
        if rule.target is Target.TABLE:
            may_see = held is not None
        else:
            may_see = self.policy.sees_namespace(principal, object_id)
        if may_see:
            return Denial(
                403,
                ErrorCode.PERMISSION_DENIED,
                f"Permission denied: {principal.name} may not {operation} {describe(object_id)} "
                f"(needs {rule.privilege.name.lower()})",
                rule.privilege.name.lower(),
            )
        kind = TableNotFoundError if rule.target is Target.TABLE else NamespaceNotFoundError
        code = (
            ErrorCode.TABLE_NOT_FOUND
            if kind is TableNotFoundError
            else ErrorCode.NAMESPACE_NOT_FOUND
        )
        message = f"{LANCE_PHRASES[kind]}: {describe(object_id)}"
        return Denial(404, code, message, rule.privilege.name.lower())

    def check_all(
        self, principal: Principal, operation: str, object_ids: Iterable[Sequence[str]]
    ) -> Denial | None:
        for object_id in object_ids:
            denial = self.check(principal, operation, object_id)
            if denial is not None:
                return denial
        return None

    def storage_permission(self, principal: Principal, table_id: Sequence[str]) -> str:
        """The storage permission credentials vended to ``principal`` for the table may carry."""
        return STORAGE_PERMISSION[self.privilege(principal, table_id)]

    def visible_children(
        self, principal: Principal, parent: Sequence[str], names: list[str]
    ) -> list[str]:
        """The namespaces under ``parent`` that ``principal`` may see."""
        if self.policy is None:
            return names
        policy = self.policy
        return [name for name in names if policy.sees_namespace(principal, (*parent, name))]

    def visible_tables(self, principal: Principal, ids: Iterable[Sequence[str]]) -> list[bool]:
        """For each table id, whether ``principal`` may see it."""
        return [self.privilege(principal, table_id) is not None for table_id in ids]
