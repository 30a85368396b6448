"""Spark data source filters -> a Lance SQL filter string.

Spark (4.1+) offers a reader the conjuncts of a query's ``WHERE`` it could push, as
``pyspark.sql.datasource`` filter objects (column paths and Python values); ``OR`` trees are
never offered. :func:`to_sql` translates one filter, or returns None when it cannot do so
with Spark's exact semantics, and the reader hands those back for Spark to evaluate.

Semantics checked against Lance (DataFusion): comparisons with NULL are NULL (the row is
dropped, as in Spark); ``-0.0 = 0.0`` and NaN sorts above every number in both; strings
compare by UTF-8 bytes in both. Values that would need a lossy literal are not pushed: NaN and
infinities, bytes, and anything on a column whose type the reader converts (unsigned
integers, float16, nanosecond timestamps...).
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (  # pyspark 4.1+, imported only where pushdown exists
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringContains,
    StringEndsWith,
    StringStartsWith,
)

_COMPARISONS = {
    EqualTo: "=",
    GreaterThan: ">",
    GreaterThanOrEqual: ">=",
    LessThan: "<",
    LessThanOrEqual: "<=",
    EqualNullSafe: "IS NOT DISTINCT FROM",
}

# The filters with one compared value (the keys above), for the type checker.
_COMPARED = (EqualTo, GreaterThan, GreaterThanOrEqual, LessThan, LessThanOrEqual, EqualNullSafe)

_STRING_FUNCTIONS = {
    StringStartsWith: "starts_with",
    StringEndsWith: "ends_with",
    StringContains: "contains",
}


def quote_identifier(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _column(
    path: Sequence[str], schema: pa.Schema, names: Mapping[str, str]
) -> tuple[str, pa.DataType] | None:
    """The Lance SQL reference to a column path, and its Arrow type (None if unknown)."""
    if not path:
        return None
    top = names.get(path[0].lower())
    if top is None:
        return None
    data_type = schema.field(top).type
    parts = [top]
    for part in path[1:]:
        if not pa.types.is_struct(data_type):
            return None
        index = data_type.get_field_index(part)
        if index < 0:
            return None
        parts.append(part)
        data_type = data_type.field(index).type
    return ".".join(quote_identifier(p) for p in parts), data_type


def _kind(data_type: pa.DataType) -> str | None:
    """The literal family a column takes, for the types whose comparisons are exact."""
    t = pa.types
    if t.is_boolean(data_type):
        return "bool"
    if t.is_int8(data_type) or t.is_int16(data_type) or t.is_int32(data_type):
        return "int"
    if t.is_int64(data_type):
        return "int"
    if t.is_float32(data_type) or t.is_float64(data_type):
        return "float"
    if t.is_decimal(data_type) and data_type.precision <= 38:
        return "decimal"
    if t.is_string(data_type) or t.is_large_string(data_type):
        return "string"
    if t.is_date32(data_type):
        return "date"
    if t.is_timestamp(data_type) and data_type.unit in ("us", "ms", "s"):
        return "timestamp_tz" if data_type.tz is not None else "timestamp_ntz"
    return None


def _literal(value: Any, kind: str) -> str | None:
    """A Lance SQL literal for ``value`` against a column of ``kind``, or None."""
    if value is None:
        return None
    if kind == "bool":
        return ("TRUE" if value else "FALSE") if isinstance(value, bool) else None
    if kind in ("int", "float", "decimal"):
        if isinstance(value, bool):
            return None
        if isinstance(value, int):
            return str(value)
        if isinstance(value, float):
            if not math.isfinite(value):
                return None
            if kind == "decimal":
                return _decimal_literal(decimal.Decimal(repr(value)))
            return repr(value)
        if isinstance(value, decimal.Decimal):
            if not value.is_finite():
                return None
            return _decimal_literal(value) if kind == "decimal" else None
        return None
    if kind == "string":
        return _string(value) if isinstance(value, str) else None
    if kind == "date":
        if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
            return f"DATE '{value.isoformat()}'"
        return None
    if kind in ("timestamp_tz", "timestamp_ntz"):
        if not isinstance(value, dt.datetime):
            return None
        if kind == "timestamp_tz":
            if value.tzinfo is None:
                return None  # an instant needs a zone; Spark always gives one
            value = value.astimezone(dt.timezone.utc).replace(tzinfo=None)
        elif value.tzinfo is not None:
            return None
        return f"TIMESTAMP '{value.isoformat(sep=' ', timespec='microseconds')}'"
    return None


def _decimal_literal(value: decimal.Decimal) -> str:
    _, digits, exponent = value.as_tuple()
    exponent = int(exponent)
    scale = max(0, -exponent)
    precision = max(len(digits) + max(0, exponent), scale, 1)
    return f"CAST('{value:f}' AS DECIMAL({min(precision, 38)}, {scale}))"


def _string(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def to_sql(filter: Filter, schema: pa.Schema, names: Mapping[str, str]) -> str | None:
    """The Lance SQL for one Spark filter, or None when it is not pushed.

    ``schema`` is the dataset's Arrow schema; ``names`` maps lower-cased Spark column names to
    the dataset's column names.
    """
    if isinstance(filter, Not):
        inner = to_sql(filter.child, schema, names)
        return None if inner is None else f"NOT ({inner})"
    attribute = getattr(filter, "attribute", None)
    if attribute is None:
        return None
    resolved = _column(tuple(attribute), schema, names)
    if resolved is None:
        return None
    column, data_type = resolved
    if isinstance(filter, IsNull):
        return f"{column} IS NULL"
    if isinstance(filter, IsNotNull):
        return f"{column} IS NOT NULL"
    kind = _kind(data_type)
    if kind is None:
        return None
    operator = _COMPARISONS.get(type(filter))
    if operator is not None:
        assert isinstance(filter, _COMPARED)
        literal = _literal(filter.value, kind)
        if literal is None:
            if isinstance(filter, EqualNullSafe) and filter.value is None:
                return f"{column} IS NULL"
            return None
        return f"{column} {operator} {literal}"
    if isinstance(filter, In):
        values = list(filter.value)
        if not values:
            return None
        literals = [_literal(v, kind) for v in values]
        if any(lit is None for lit in literals):
            return None
        return f"{column} IN ({', '.join(literals)})"  # type: ignore[arg-type]
    function = _STRING_FUNCTIONS.get(type(filter))
    if function is not None and kind == "string":
        assert isinstance(filter, (StringStartsWith, StringEndsWith, StringContains))
        if isinstance(filter.value, str):
            return f"{function}({column}, {_string(filter.value)})"
    return None


def combine(clauses: Sequence[str]) -> str | None:
    """AND the clauses together (None when there are none)."""
    if not clauses:
        return None
    if len(clauses) == 1:
        return clauses[0]
    return " AND ".join(f"({c})" for c in clauses)
