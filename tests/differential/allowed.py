"""The divergences docs/compatibility.md lists, read from its table.

The table sits between ``<!-- divergences:begin -->`` and ``<!-- divergences:end -->``; each
row is ``| conversations | API | versions | field | reason |``:

- conversations: a glob of conversation names (``*``: all);
- API: Kafka's name (``Metadata``), several separated by commas, or ``*``;
- versions: ``*``, ``3``, ``0-4`` or ``0-2, 5``;
- field: the field's path, in backquotes; ``*`` matches one name or index, ``**`` anything.
  Indexes of ordered arrays are written ``[]`` (``records[].base_offset``), entries of
  unordered ones by their name (``configs[retention.ms].value``, ``api_keys[0].max_version``);
  a pattern may also name an index (``records[1].base_offset``);
- reason: why oncelog answers differently (required).
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from pathlib import Path

from .replay import Difference

DOC = Path(__file__).resolve().parents[2] / "docs" / "compatibility.md"
BEGIN, END = "<!-- divergences:begin -->", "<!-- divergences:end -->"


@dataclass
class Entry:
    conversations: str
    api: set[str]  # {"*"}: any
    versions: set[int] | None  # None: every version
    field: str
    reason: str
    line: int
    used: int = 0

    def matches(self, difference: Difference) -> bool:
        return (fnmatch.fnmatchcase(difference.conversation, self.conversations)
                and ("*" in self.api or difference.api in self.api)
                and (self.versions is None or difference.version in self.versions)
                and _glob(self.field).fullmatch(difference.path) is not None
                or fnmatch.fnmatchcase(difference.conversation, self.conversations)
                and ("*" in self.api or difference.api in self.api)
                and (self.versions is None or difference.version in self.versions)
                and _glob(self.field).fullmatch(difference.where) is not None)


def _glob(pattern: str) -> re.Pattern[str]:
    """``**`` matches anything, ``*`` anything but brackets (one name or index); everything
    else is literal (brackets included)."""
    return re.compile(".*".join("[^][]*".join(map(re.escape, part.split("*")))
                                for part in pattern.split("**")))


@dataclass
class Allowed:
    entries: list[Entry] = field(default_factory=list)

    def reason(self, difference: Difference) -> str | None:
        for entry in self.entries:
            if entry.matches(difference):
                entry.used += 1
                return entry.reason
        return None


def _versions(text: str) -> set[int] | None:
    text = text.strip()
    if text in ("*", "all"):
        return None
    versions: set[int] = set()
    for part in text.split(","):
        low, _, high = part.strip().partition("-")
        versions.update(range(int(low), int(high or low) + 1))
    return versions


def load_allowed(doc: Path = DOC) -> Allowed:
    lines = doc.read_text().splitlines()
    try:
        start, end = lines.index(BEGIN), lines.index(END)
    except ValueError:
        raise ValueError(f"{doc} has no {BEGIN} ... {END} table") from None
    entries = []
    for number in range(start + 1, end):
        line = lines[number].strip()
        if not line.startswith("|") or set(line) <= set("|- "):
            continue
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if cells[0].lower() == "conversations":
            continue  # the header
        if len(cells) != 5 or not cells[4]:
            raise ValueError(f"{doc}:{number + 1}: a row needs 5 cells, the reason last")
        conversations, api, versions, path, reason = cells
        entries.append(Entry(conversations.strip("`"), {a.strip() for a in api.split(",")},
                             _versions(versions),
                             re.sub(r"^`|`$", "", path), reason, number + 1))
    return Allowed(entries)
