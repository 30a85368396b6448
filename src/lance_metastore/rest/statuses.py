"""The HTTP status of each error code: the spec's mapping table, written once.

The server answers each error with the status this table gives its code, and the OpenAPI
document lists the same statuses with the codes behind them, so the two cannot drift.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ErrorStatus:
    """One HTTP status an error answer may carry, what it means, and the codes it carries."""

    status: int
    meaning: str
    codes: tuple[int, ...]

    @property
    def description(self) -> str:
        """``meaning`` with its codes, as the OpenAPI document shows it."""
        if len(self.codes) == 1:
            which = f"code {self.codes[0]}"
        elif len(self.codes) == 2:
            which = f"code {self.codes[0]} or {self.codes[1]}"
        else:
            which = "codes " + ", ".join(str(code) for code in self.codes)
        return f"{self.meaning} ({which})"


# The spec's table "Error Code to HTTP Status Mapping".
SPEC_STATUSES: tuple[ErrorStatus, ...] = (
    ErrorStatus(400, "Invalid input", (13, 20)),
    ErrorStatus(401, "Missing or invalid bearer token", (16,)),
    ErrorStatus(403, "Permission denied", (15,)),
    ErrorStatus(404, "Object not found", (1, 4, 6, 8, 10, 11, 12, 22)),
    ErrorStatus(406, "Operation not supported by this namespace", (0,)),
    ErrorStatus(409, "Conflict", (2, 3, 5, 7, 9, 14, 19, 23)),
    ErrorStatus(429, "Throttled", (21,)),
    ErrorStatus(500, "Internal error", (18,)),
    ErrorStatus(503, "Catalog unavailable", (17,)),
)

# Statuses the server adds to the spec's: an over-limit body is code 13 answered as 413.
SERVER_STATUSES: tuple[ErrorStatus, ...] = (
    ErrorStatus(413, "Request body over the server's limit", (13,)),
)

_STATUS_OF_CODE: dict[int, int] = {
    code: entry.status for entry in SPEC_STATUSES for code in entry.codes
}


def http_status(code: int) -> int:
    """The HTTP status the spec gives an error code (500 for a code it does not know)."""
    return _STATUS_OF_CODE.get(int(code), 500)


def documented_statuses() -> dict[str, str]:
    """Every error status the server answers, by status text, with its description."""
    entries = sorted(SPEC_STATUSES + SERVER_STATUSES, key=lambda entry: entry.status)
    return {str(entry.status): entry.description for entry in entries}
