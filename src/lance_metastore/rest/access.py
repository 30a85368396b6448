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

Every decision runs on the **canonical id**, the id as the backend acts on it (its
``canonical_id``: Glue and Hive lower-case ASCII letters): ``DB$T`` is judged as ``db$t``. A
policy's grants are canonicalised the same way when the policy loads (and when the server
binds it to its namespace); a grant no id can ever match (a name the backend refuses) is a
load error naming it. Listings apply :meth:`AccessControl.visible` inside the listing, before
the page is cut (:mod:`~lance_metastore.rules.visibility`).

Principals are **scheme-qualified**: a grant names ``bearer:alice``, ``api-key:etl``,
``jwt:alice`` (the scheme that proved the caller, then its name), ``*`` for everyone, or a
name the policy's ``principals`` object maps to such identities::

    {"principals": {"platform": ["bearer:platform", "jwt:platform"]},
     "grants": [{"principal": "platform", "namespace": [], "privilege": "manage"},
                {"principal": "jwt:alice", "namespace": ["sales"], "privilege": "read"}]}

An unqualified name that the policy does not map is a load error: a JWT whose ``sub`` is
``platform`` is never the token principal ``platform``.
"""

from __future__ import annotations

import enum
import json
import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from lance_namespace.errors import (
    ErrorCode,
    LanceNamespaceError,
    NamespaceNotFoundError,
    TableNotFoundError,
)

from ..rules.errors import LANCE_PHRASES
from ..rules.identifiers import DELIMITER, Path, describe, split_identifier
from ..rules.visibility import NAMESPACE, TABLE
from .auth import Authenticator, Headers, InvalidCredentials, Principal, read_private_file
from .auth import _SecretsFileScheme as SecretsFileScheme

logger = logging.getLogger("lance_metastore.rest")

ANONYMOUS = Principal("anonymous", "none")
EVERYONE = "*"  # a policy entry for every principal, anonymous included

# (id, NAMESPACE or TABLE) -> the id as the backend acts on it; raises the backend's
# InvalidInputError for an id it refuses. The identity for a namespace we know nothing of.
Canonical = Callable[[Sequence[str], str], Path]


def as_given(parts: Sequence[str], kind: str) -> Path:
    return tuple(parts)


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

# Operations whose id is a table's id followed by a transaction's: judged on the table.
TRANSACTION_OPERATIONS = frozenset({"describe_transaction", "alter_transaction"})

OPERATION_PRIVILEGES: dict[str, Rule] = {
    "list_namespaces": Rule(P.LIST, NS, navigates=True),
    "namespace_exists": Rule(P.LIST, NS, navigates=True),
    **_rules(P.LIST, NS, "describe_namespace", "list_tables"),
    **_rules(P.CREATE, NS, "create_namespace", "drop_namespace"),
    # With an id, a namespace the caller must see (else 404, as for a missing one); without,
    # the whole catalog, of which the caller is shown its visible tables only.
    "list_all_tables": Rule(P.LIST, NS, navigates=True),
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


def reads_only(operation: str) -> bool:
    """Whether ``operation`` only reads (needs at most the ``read`` privilege); an operation
    the table does not know counts as a change."""
    rule = OPERATION_PRIVILEGES.get(operation)
    return rule is not None and rule.privilege <= Privilege.READ


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
    """The grants of a policy file, indexed by scheme-qualified principal. ``None`` as a policy
    (no file) lets every authenticated caller do everything, as a single-token server always
    did."""

    def __init__(self, grants: Iterable[Grant]) -> None:
        self.grants: dict[str, list[Grant]] = {}
        for grant in grants:
            self.grants.setdefault(grant.principal, []).append(grant)

    @classmethod
    def from_file(cls, path: str, canonical: Canonical = as_given) -> Policy:
        """A policy from a JSON file, or YAML (``.yaml``/``.yml``, needs PyYAML)::

        {"grants": [{"principal": "bearer:analyst", "namespace": ["sales"], "privilege": "read"}]}

        The file is refused, like a token file, when other users can change it.
        """
        text = read_private_file(path, "policy file", lambda _: None)
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
        return cls(_grants_of(content, path, canonical))

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
        return self.grants.get(principal.qualified, []) + self.grants.get(EVERYONE, [])


def _grants_of(content: Any, path: str, canonical: Canonical) -> list[Grant]:
    if not isinstance(content, dict) or not isinstance(content.get("grants"), list):
        raise ValueError(f"The policy file {path} must hold an object with a list 'grants'")
    unknown = set(content) - {"grants", "principals"}
    if unknown:
        raise ValueError(f"The policy file {path}: unknown keys {sorted(unknown)}")
    aliases = _principals_of(content.get("principals", {}), path)
    grants = []
    for number, entry in enumerate(content["grants"], 1):
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
        prefix = _canonical_prefix(namespace, canonical, where)
        for identity in _identities(principal, aliases, where):
            grants.append(Grant(identity, prefix, privilege))
    return grants


def _principals_of(content: Any, path: str) -> dict[str, list[str]]:
    """The policy's ``principals`` object: a name -> the scheme-qualified identities it means."""
    where = f"The policy file {path}, principals"
    if not isinstance(content, dict):
        raise ValueError(f"{where}: must map names to lists of scheme:name identities")
    aliases: dict[str, list[str]] = {}
    for name, identities in content.items():
        if ":" in name or name == EVERYONE or not name:
            # a name with a scheme would silently stand for other identities than its own
            raise ValueError(
                f"{where}: {name!r} cannot be a name here: a principals name has no ':' "
                f"(that is a scheme-qualified identity) and is not {EVERYONE!r}"
            )
        if not isinstance(identities, list) or not identities:
            raise ValueError(f"{where}: {name!r} must map to a list of scheme:name identities")
        for identity in identities:
            if not isinstance(identity, str) or not _is_qualified(identity):
                raise ValueError(
                    f"{where}: {name!r} maps to {identity!r}, which is not scheme:name "
                    "(e.g. bearer:alice, api-key:etl, jwt:alice)"
                )
        aliases[name] = list(identities)
    return aliases


def _is_qualified(identity: str) -> bool:
    scheme, colon, name = identity.partition(":")
    return bool(colon and scheme and name)


def _identities(principal: str, aliases: dict[str, list[str]], where: str) -> list[str]:
    if principal == EVERYONE:
        return [EVERYONE]
    if principal in aliases:
        return aliases[principal]
    if _is_qualified(principal):
        return [principal]
    raise ValueError(
        f"{where}: principal {principal!r} names no scheme: write bearer:{principal}, "
        f"api-key:{principal} or jwt:{principal} (the scheme that proves the caller), or map "
        f"{principal!r} to those identities under 'principals'"
    )


def _canonical_prefix(namespace: list[str], canonical: Canonical, where: str) -> Path:
    """A grant's prefix as the backend names it; a prefix it would refuse can never match, nor
    can a name holding the delimiter (every id form splits it: ``["a$b"]`` is never one
    namespace ``a$b``)."""
    for part in namespace:
        if DELIMITER in part:
            raise ValueError(
                f"{where}: namespace {namespace!r} can never match as written: the name "
                f"{part!r} holds the delimiter {DELIMITER!r}, which splits every id (write "
                f"{list(split_identifier(namespace))!r} if that is meant)"
            )
    problems = []
    for kind in (NAMESPACE, TABLE):
        try:
            return canonical(namespace, kind)
        except LanceNamespaceError as error:
            problems.append(str(error))
    raise ValueError(
        f"{where}: namespace {namespace!r} can never match, the catalog refuses it: {problems[0]}"
    )


def _check_scheme_name(authenticator: Authenticator) -> None:
    """A scheme must name itself: its name qualifies every principal it proves, and without
    one, principals of different schemes (``:bob``) would be one."""
    scheme = getattr(authenticator, "scheme", "")
    if not isinstance(scheme, str) or not scheme or ":" in scheme or scheme == "none":
        raise ValueError(
            f"The auth scheme {type(authenticator).__name__} needs a class attribute 'scheme': "
            "a name without ':' other than 'none' (it qualifies its principals, e.g. proxy:bob)"
        )


def _check_distinct_principals(
    authenticators: Sequence[Authenticator], staged: dict[int, Any] | None = None
) -> None:
    """Two schemes of one name (``--auth-token-file`` and ``--tokens-file`` are both
    ``bearer``) must not prove one principal name by different secrets: ``bearer:token``
    would be two callers the policy cannot tell apart."""
    seen: dict[str, int] = {}
    for number, authenticator in enumerate(authenticators):
        if staged and number in staged:
            names = staged[number].principals()
        elif isinstance(authenticator, SecretsFileScheme):
            names = authenticator.principal_names()
        else:
            continue
        for name in names:
            qualified = f"{authenticator.scheme}:{name}"
            if seen.setdefault(qualified, number) != number:
                raise ValueError(
                    f"Two auth schemes prove the principal {qualified!r}: rename one (the "
                    "single token of --auth-token-file is 'token'; a tokens file must not "
                    "list 'token' too)"
                )


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
        self,
        authenticators: Sequence[Authenticator] = (),
        policy_file: str | None = None,
        canonical: Canonical = as_given,
    ) -> None:
        self.authenticators = list(authenticators)
        for authenticator in self.authenticators:
            _check_scheme_name(authenticator)
        _check_distinct_principals(self.authenticators)
        self.policy_file = policy_file
        self.canonical = canonical
        self.policy = Policy.from_file(policy_file, canonical) if policy_file else None
        self._reloading = threading.Lock()

    def bind(self, canonical: Canonical) -> None:
        """Judge ids as the served namespace acts on them: the policy is loaded again with its
        grants canonicalised by ``canonical`` (a ValueError names a grant that never matches)."""
        with self._reloading:
            policy = Policy.from_file(self.policy_file, canonical) if self.policy_file else None
            self.canonical, self.policy = canonical, policy

    @property
    def authenticates(self) -> bool:
        """Whether callers must prove who they are (what ``--insecure``'s rule asks)."""
        return bool(self.authenticators)

    def reload(self) -> None:
        """Re-read every file; a file that fails keeps its old state and the error is logged."""
        with self._reloading:
            self._reload()

    def _reload(self) -> None:
        staged: dict[int, Any] = {}  # secrets files read first, applied only if distinct
        for number, authenticator in enumerate(self.authenticators):
            try:
                if isinstance(authenticator, SecretsFileScheme):
                    staged[number] = authenticator.read()
                else:
                    authenticator.reload()
            except Exception as error:
                logger.error("reload of %r failed, keeping the old state: %s", authenticator, error)
        try:
            _check_distinct_principals(self.authenticators, staged)
        except ValueError as error:
            logger.error("reload of the secrets files refused, keeping the old ones: %s", error)
        else:
            for number, lookup in staged.items():
                cast(SecretsFileScheme, self.authenticators[number]).apply(lookup)
        if self.policy_file:
            try:
                self.policy = Policy.from_file(self.policy_file, self.canonical)
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
        """None when ``principal`` may run ``operation`` on ``object_id``, else the denial.

        The decision (and the message) is on the canonical id; an id the backend refuses
        raises its InvalidInputError (400, whoever asks: it depends on the id alone)."""
        rule = OPERATION_PRIVILEGES[operation]
        if self.policy is None:  # without a policy every admitted caller may do everything
            return None
        if operation in TRANSACTION_OPERATIONS:
            object_id = tuple(object_id)[:-1]  # a transaction's id is its table's and its own
        object_id = self.canonical(object_id, TABLE if rule.target is Target.TABLE else NAMESPACE)
        held = self.privilege(principal, object_id)
        if held is not None and held >= rule.privilege:
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
                f"Permission denied: {principal.qualified} may not {operation} "
                f"{describe(object_id)} (needs {rule.privilege.name.lower()})",
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
        if self.policy is None:
            return STORAGE_PERMISSION[Privilege.MANAGE]
        return STORAGE_PERMISSION[self.privilege(principal, self._canonical_any(table_id))]

    def _canonical_any(self, object_id: Sequence[str]) -> Path:
        for kind in (TABLE, NAMESPACE):
            try:
                return self.canonical(object_id, kind)
            except LanceNamespaceError:
                pass
        return tuple(object_id)  # refused by the backend itself, right after

    def visible(self, principal: Principal) -> Callable[[Sequence[str], str], bool] | None:
        """What ``principal`` may see, as listings ask it (None: everything): a namespace on
        the way to a grant or under one, a table under a grant. Ids come canonical from the
        catalog's own listings."""
        policy = self.policy
        if policy is None:
            return None

        def visible(object_id: Sequence[str], kind: str) -> bool:
            if kind == NAMESPACE:
                return policy.sees_namespace(principal, object_id)
            return policy.privilege(principal, object_id) is not None

        return visible
