"""Reading vCard files (``.vcf``, what a phone's contacts app exports) as a table.

The reader yields the same :class:`campaigns.spreadsheets.Table` a spreadsheet gives, so
the importer's rules (phones, merging, rejects, attributes) apply unchanged: one row per
card, numbered by the card's position in the file (the first card is card 1), with the
columns ``name``, ``phone`` and ``organisation``.

- Versions 2.1, 3.0 and 4.0; several cards per file; text outside ``BEGIN:VCARD`` /
  ``END:VCARD`` is ignored.
- Folded lines (a line starting with a space or tab continues the previous one) are
  unfolded; in 2.1, a ``QUOTED-PRINTABLE`` value ending with ``=`` continues on the next
  line. Quoted-printable bytes are decoded in the property's ``CHARSET`` (UTF-8 when
  none is given); values are unescaped (``\\,`` ``\\;`` ``\\n``).
- The name is ``FN``, else ``N`` as "given additional family" (prefix and suffix left
  out). ``ORG``'s parts are joined with ", ".
- The phone: among the card's ``TEL`` properties, a mobile one (``TYPE=CELL``,
  ``type=cell``, 2.1's bare ``CELL``, ``mobile``) first, then a preferred one (``PREF``,
  ``TYPE=pref``, ``PREF=1``), then one not typed home, work, fax or pager, then the rest
  (fax and pager last), each group in file order. A 4.0 ``tel:`` URI loses its scheme and
  any ``;ext=``. A card without ``TEL`` keeps an empty phone, which the importer rejects
  with its reason.
- The file is UTF-8 (with or without BOM), else cp1252.
- Limits (:class:`~campaigns.spreadsheets.TableLimits`): the file's size (checked by
  :func:`campaigns.spreadsheets.read_table` before reading), at most ``rows`` cards, and
  no unfolded line longer than ``cell_chars`` characters (refused naming the card and
  its line number).
"""

from __future__ import annotations

import quopri
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from campaigns.file_types import VCARD_SUFFIXES
from campaigns.spreadsheets import SpreadsheetError, Table, TableLimits

#: the columns of the table a vCard file becomes
NAME_COLUMN = "name"
PHONE_COLUMN = "phone"
ORGANISATION_COLUMN = "organisation"
COLUMNS = (NAME_COLUMN, PHONE_COLUMN, ORGANISATION_COLUMN)
#: the suffixes read as vCard
SUFFIXES = frozenset(VCARD_SUFFIXES)

_MOBILE = {"cell", "mobile", "iphone"}
_ELSEWHERE = {"home", "work"}
_LAST = {"fax", "pager"}
_ESCAPES = re.compile(r"\\(.)", re.DOTALL)
_DEFAULT_LIMITS = TableLimits()


def is_vcard(path: Path) -> bool:
    """Whether ``path`` is read as a vCard file (by its suffix)."""
    return path.suffix.lower() in SUFFIXES


@dataclass
class _Property:
    name: str
    params: dict[str, list[str]]
    value: str  # undecoded


@dataclass
class _Card:
    number: int
    line: int
    properties: list[_Property] = field(default_factory=list)


def _decode_file(path: Path, data: bytes) -> str:
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("cp1252", errors="replace")


def _split_params(text: str) -> tuple[str, dict[str, list[str]]]:
    """``group.NAME;P=a,b;BARE`` -> (``NAME``, {``p``: [``a``, ``b``], ``type``: [``bare``]})."""
    parts = _split_unquoted(text, ";")
    name = parts[0].rsplit(".", 1)[-1].strip().upper()
    params: dict[str, list[str]] = {}
    for part in parts[1:]:
        key, sep, value = part.partition("=")
        if not sep:  # vCard 2.1: a bare value (CELL, PREF, QUOTED-PRINTABLE)
            key, value = _bare_key(key), key
        values = [v.strip().strip('"').lower() for v in _split_unquoted(value, ",")]
        params.setdefault(key.strip().lower(), []).extend(v for v in values if v)
    return name, params


def _bare_key(value: str) -> str:
    upper = value.strip().upper()
    if upper in ("QUOTED-PRINTABLE", "BASE64", "8BIT", "7BIT", "B"):
        return "encoding"
    if upper.startswith(("UTF-", "ISO-", "WINDOWS-", "US-ASCII")):
        return "charset"
    return "type"


def _split_unquoted(text: str, sep: str) -> list[str]:
    out: list[str] = []
    current: list[str] = []
    quoted = False
    for ch in text:
        if ch == '"':
            quoted = not quoted
        if ch == sep and not quoted:
            out.append("".join(current))
            current = []
        else:
            current.append(ch)
    out.append("".join(current))
    return out


def _split_line(line: str) -> tuple[str, str] | None:
    """A content line split at its first ``:`` outside quotes, or None without one."""
    quoted = False
    for i, ch in enumerate(line):
        if ch == '"':
            quoted = not quoted
        elif ch == ":" and not quoted:
            return line[:i], line[i + 1 :]
    return None


def _logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """The unfolded lines with the number of the physical line each starts on."""
    current: str | None = None
    start = 0
    qp_continues = False
    for number, raw in enumerate(text.splitlines(), 1):
        if current is not None and qp_continues:
            current = current[:-1] + raw  # a soft line break: "=" at the end
        elif current is not None and raw[:1] in (" ", "\t"):
            current += raw[1:]
        else:
            if current is not None:
                yield start, current
            current, start = raw, number
        qp_continues = current.endswith("=") and "QUOTED-PRINTABLE" in _head(current)
    if current is not None:
        yield start, current


def _head(line: str) -> str:
    split = _split_line(line)
    return split[0].upper() if split else ""


def _cards(path: Path, text: str, limits: TableLimits) -> list[_Card]:
    cards: list[_Card] = []
    card: _Card | None = None
    for number, line in _logical_lines(text):
        if len(line) > limits.cell_chars:
            where = f"card {card.number}, " if card is not None else ""
            raise SpreadsheetError(
                f"{path}: {where}line {number}: a line of {len(line):,} characters, "
                f"over the import limit of {limits.cell_chars:,}"
            )
        split = _split_line(line.strip())
        if split is None:
            continue
        head, value = split
        name, params = _split_params(head)
        if name == "BEGIN" and value.strip().upper() == "VCARD":
            if len(cards) >= limits.rows:
                raise SpreadsheetError(
                    f"{path}: more than {limits.rows:,} cards, "
                    f"over the import limit of {limits.rows:,} cards"
                )
            card = _Card(len(cards) + 1, number)
            cards.append(card)
        elif name == "END" and value.strip().upper() == "VCARD":
            card = None
        elif card is not None:
            card.properties.append(_Property(name, params, value))
    return cards


def _value(prop: _Property) -> str:
    """The property's text: quoted-printable decoded in its charset."""
    value = prop.value
    if "quoted-printable" in prop.params.get("encoding", []):
        charset = (prop.params.get("charset") or ["utf-8"])[0]
        raw = quopri.decodestring(value.encode("latin-1", errors="replace"))
        try:
            value = raw.decode(charset, errors="replace")
        except LookupError:
            value = raw.decode("utf-8", errors="replace")
    return value


def _components(value: str) -> list[str]:
    """A structured value's parts (split at unescaped ``;``), each unescaped."""
    parts = re.split(r"(?<!\\);", value)
    return [_unescape(p) for p in parts]


def _unescape(value: str) -> str:
    return _ESCAPES.sub(lambda m: "\n" if m.group(1) in "nN" else m.group(1), value).strip()


def _tel_rank(prop: _Property, position: int) -> tuple[int, int]:
    types = set(prop.params.get("type", []))
    if prop.params.get("pref"):
        types.add("pref")
    if types & _MOBILE:
        group = 0
    elif "pref" in types:
        group = 1
    elif types & _LAST:
        group = 4
    elif types & _ELSEWHERE:
        group = 3
    else:
        group = 2
    return group, position


def _phone(card: _Card) -> str:
    tels = [(p, i) for i, p in enumerate(card.properties) if p.name == "TEL"]
    tels = [(p, i) for p, i in tels if _value(p).strip()]
    if not tels:
        return ""
    best = min(tels, key=lambda t: _tel_rank(*t))[0]
    value = _unescape(_value(best))
    if value.lower().startswith("tel:"):
        value = value[4:].split(";", 1)[0]
    return value


def _name(card: _Card) -> str:
    for prop in card.properties:
        if prop.name == "FN":
            name = " ".join(_unescape(_value(prop)).split())
            if name:
                return name
    for prop in card.properties:
        if prop.name == "N":
            parts = [*_components(_value(prop)), "", "", ""]
            family, given, additional = parts[0], parts[1], parts[2]
            return " ".join(" ".join((given, additional, family)).split())
    return ""


def _organisation(card: _Card) -> str:
    for prop in card.properties:
        if prop.name == "ORG":
            return ", ".join(p for p in _components(_value(prop)) if p)
    return ""


def read_vcards(path: Path, *, limits: TableLimits = _DEFAULT_LIMITS) -> Table:
    """Read a vCard file as a table of ``name``, ``phone``, ``organisation`` (module notes);
    its index is each card's number. :class:`SpreadsheetError` names the file and the
    problem."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise SpreadsheetError(f"{path}: cannot read file ({exc.strerror})") from None
    cards = _cards(path, _decode_file(path, data).replace("\x00", ""), limits)
    if not cards:
        raise SpreadsheetError(f"{path}: no contact cards (BEGIN:VCARD) found in the file")
    frame = pd.DataFrame(
        {
            NAME_COLUMN: [_name(c) for c in cards],
            PHONE_COLUMN: [_phone(c) for c in cards],
            ORGANISATION_COLUMN: [_organisation(c) for c in cards],
        },
        index=pd.Index([c.number for c in cards]),
        dtype=str,
    )
    for column in COLUMNS:
        too_long = frame[column].str.len() > limits.cell_chars
        if too_long.any():
            number = int(frame.index[too_long.to_numpy()][0])
            raise SpreadsheetError(
                f"{path}: card {number}: the {column} is longer than the import limit "
                f"of {limits.cell_chars:,} characters"
            )
    return Table(path, frame, encoding="utf-8", header_row=0)


__all__ = ["COLUMNS", "SUFFIXES", "is_vcard", "read_vcards"]
