"""``SinkError``, and the identifier rule whose violations raise it.

Table and column names reach SQL as double-quoted identifiers. Only simple names
(``[A-Za-z_][A-Za-z0-9_]*``) are accepted, so a name can never close its quotes; quoted names
are case-sensitive in PostgreSQL, so ``Events`` and ``events`` are different tables.
"""

from __future__ import annotations

import re

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class SinkError(ValueError):
    """A sink was misconfigured, or its database or broker refused a connection or a batch."""


def quote_identifier(name: str) -> str:
    """``name`` double-quoted for SQL; anything but a simple identifier raises ``SinkError``."""
    if not isinstance(name, str) or not _IDENTIFIER.match(name):
        raise SinkError(f"{name!r} is not a simple SQL identifier ([A-Za-z_][A-Za-z0-9_]*).")
    return f'"{name}"'


def first_line(error: BaseException) -> str:
    """The first line of a driver's message (psycopg adds DETAIL and HINT lines)."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
