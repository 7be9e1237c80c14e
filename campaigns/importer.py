"""The contact import pipeline: spreadsheet -> E.164 contacts in a named list + a report.

Steps: read every cell as text (:mod:`campaigns.spreadsheets`; the header row is the
first row with a phone column, below any title rows), find the phone and name columns,
pick each row's phone when there are several phone columns (the mobile one first),
normalise each distinct phone value once (:mod:`campaigns.phones`), reject
unusable rows with their spreadsheet row number, merge duplicates within the file
(last non-empty value wins), then upsert contacts and list membership in ONE
transaction with bulk Core statements (:mod:`storage.queries.contacts`). A failure
leaves contacts and lists untouched; the import job row is then marked failed in a
transaction of its own.

Rules (also in docs/contacts-import.md):
- attributes: every column except the phone and name columns, under a template-friendly
  key: lowercase, runs of non-letters/digits -> ``_`` (``"Plan Type"`` -> ``plan_type``);
  empty cells are left out, so they never blank a value stored earlier;
- duplicates in the file: one contact per E.164 number, the last non-empty value of each
  column wins; every extra row counts as a duplicate;
- several phone columns (Outlook's ``Mobile Phone``/``Business Phone``/``Home Phone``, a
  CRM's ``Phone``/``Mobile``, Google's ``Phone 1 - Type``/``Phone 1 - Value`` pairs): each
  row takes the first non-empty one of a mobile column (or a value typed ``Mobile``),
  then the best-named other one, then the rest in file order; in a cell holding
  several numbers (Google's `` ::: ``) the first;
- a ``tags`` column (comma-separated) tags its row's contact, and ``tags`` in the options
  tag every contact of the file (tags are only added); an unusable tag rejects its row;
- a ``timezone`` column is kept as the attribute ``timezone``; a value that is not an
  IANA time zone (``Europe/Berlin``) rejects its row with the reason;
- existing contacts: updated (name only by a non-empty name, attributes merged, new keys
  win) and counted as ``updated`` only when that changes what is stored, else as
  ``unchanged``; an opted-out contact stays opted out, joins the list, and counts as
  ``skipped_opted_out``;
- a vCard file (``.vcf``) is read by :mod:`campaigns.vcards` into the same table shape
  (one row per card, numbered by card: the report's ``record`` says ``card``);
- an opt-out file (``ImportOptions.opt_out``) goes into no list: every valid number is
  opted out (unknown ones created opted out); ``imported`` counts the contacts created,
  ``updated`` those opted out now, ``unchanged`` those already opted out.
"""

from __future__ import annotations

import csv
import json
import logging
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pandas as pd
import phonenumbers
from sqlalchemy import Connection, Engine, Table, insert, update
from sqlalchemy.exc import DBAPIError

from campaigns.audiences import clean_list_name
from campaigns.campaign_file import timezone_problem
from campaigns.import_runs import mark_interrupted_imports, runner_id
from campaigns.phones import (
    PhoneResult,
    RegionHint,
    normalise_batch,
    normalise_phone,
    region_hint,
)
from campaigns.search_index import catch_up_search
from campaigns.segments import clean_tag, fold_value
from campaigns.spreadsheets import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_CELL_CHARS,
    DEFAULT_MAX_COLUMNS,
    DEFAULT_MAX_ROWS,
    DEFAULT_MAX_UNCOMPRESSED,
    ExcelEngine,
    HeaderTest,
    SpreadsheetError,
    TableLimits,
    check_size,
    read_table,
)
from campaigns.untrusted_files import ParseLimits, parsed_apart, read_apart
from campaigns.vcards import is_vcard, read_vcards
from storage import tables
from storage.engine import take_write_lock
from storage.queries import audiences as aq
from storage.queries import contacts as q
from storage.types import utcnow

Progress = Callable[[int, int], None]

log = logging.getLogger(__name__)

imports: Table = tables.imports

NAME_MAX = 300
RAW_PHONE_MAX = 200
REASON_NAME_TOO_LONG = f"name longer than {NAME_MAX} characters"
REASON_MIXED_ENCODING = (
    "row written in another text encoding than the rest of the file ({encoding}): "
    "left out rather than stored garbled; save the file as UTF-8 and import it again"
)

# Header words, compared without case, accents, spaces or punctuation; earlier wins.
PHONE_HEADERS = (
    "whatsapp",
    "whatsappnumber",
    "whatsappphone",
    "mobile",
    "mobilenumber",
    "mobilephone",
    "mobileno",
    "cell",
    "cellphone",
    "cellnumber",
    "cellular",
    "celular",
    "movil",
    "telemovel",
    "handy",
    "handynummer",
    "mobiltelefon",
    "portable",
    "cellulare",
    "msisdn",
    "phone",
    "phonenumber",
    "phoneno",
    "contactnumber",
    "telephone",
    "telephonenumber",
    "telefone",
    "telefono",
    "telefon",
    "telefonnummer",
    "tel",
    "numerodetelefone",
    "numerodetelefono",
    "numerodetelephone",
    "number",
    "numero",
    "nummer",
)
# substrings tried when no header matches a whole word above
PHONE_HINTS = ("whatsapp", "mobile", "phone", "celular", "cell", "msisdn", "telef", "handy")
# more phone columns (all used, row by row): "Mobile Phone", "Business Phone 2",
# "Mobile Phone Number"; words that say the column holds mobile numbers
_PHONE_COLUMN = re.compile(
    r"[a-z]*(?:phone|mobile|cell|handy|whatsapp|telefon|telephone|telefone|telefono)"
    r"(?:number|no|nummer)?\d*"
)
_MOBILE_WORDS = re.compile(r"whatsapp|mobil|cell|handy|celular|m[oó]vil|portable|msisdn")
_GENERIC_PHONE_HEADERS = frozenset({"number", "numero", "nummer", "tel"})
# Google Contacts: "Phone 1 - Type" (or "- Label") = "Mobile", "Phone 1 - Value" = numbers
_GOOGLE_VALUE = re.compile(r"phone(\d+)value")
_MULTI_VALUE_SEP = ":::"
NAME_HEADERS = (
    "name",
    "fullname",
    "contactname",
    "customername",
    "displayname",
    "nombre",
    "nombrecompleto",
    "nome",
    "nomecompleto",
    "nom",
    "nomcomplet",
    "vollstandigername",
)
FIRST_NAME_HEADERS = (
    "firstname",
    "givenname",
    "forename",
    "first",
    "vorname",
    "prenom",
    "primernombre",
)
LAST_NAME_HEADERS = (
    "lastname",
    "surname",
    "familyname",
    "last",
    "nachname",
    "apellido",
    "apellidos",
    "sobrenome",
)


class ImportFailed(Exception):
    """An import that could not run; the message names the file, row or column."""


class MappingFailed(ImportFailed):
    """The user's column-to-attribute mapping cannot be followed (the message says why)."""


@dataclass(frozen=True)
class ImportOptions:
    """How to read and where to put one import."""

    list_name: str
    phone_column: str | None = None
    name_column: str | None = None
    region: str = "US"
    sheet: str | int | None = None
    max_bytes: int = DEFAULT_MAX_BYTES
    xlsx_max_uncompressed_bytes: int = DEFAULT_MAX_UNCOMPRESSED
    max_columns: int = DEFAULT_MAX_COLUMNS
    max_rows: int = DEFAULT_MAX_ROWS
    max_cell_chars: int = DEFAULT_MAX_CELL_CHARS
    encoding: str | None = None
    delimiter: str | None = None
    excel_engine: ExcelEngine = "calamine"
    #: what reading a workbook in its child process may use (memory, time, output)
    parse_limits: ParseLimits = field(default_factory=ParseLimits)
    #: tags given to every contact of the file (``--tag``), besides a ``tags`` column
    tags: tuple[str, ...] = ()
    #: opt every number of the file out instead of importing into a list (no list needed;
    #: unknown numbers become opted-out contacts)
    opt_out: bool = False
    #: the user's mapping of columns to attribute keys (``(column, key)``; an empty key
    #: leaves the column out); a column not named here keeps its default key
    attributes: tuple[tuple[str, str], ...] = ()


#: the opt-out reason kept with the contacts an opt-out file opts out
OPT_OUT_FILE_REASON = "opt-out file"


#: cells that mean "no value" in exported spreadsheets (compared stripped, without case):
#: a name, attribute or tags cell holding one of them is read as empty
EMPTY_PLACEHOLDERS = frozenset(
    {"na", "n/a", "n.a.", "n.a", "#n/a", "null", "nil", "-", "--", "---", "\u2013", "\u2014"}
)


def blank_placeholders(values: pd.Series) -> pd.Series:
    """``values`` with the cells of :data:`EMPTY_PLACEHOLDERS` (``NA``, ``N/A``, ``null``,
    ``-``...) made empty."""
    folded = values.str.strip().str.casefold()
    return values.mask(folded.isin(EMPTY_PLACEHOLDERS), "")


#: the attribute key of the column whose comma-separated values tag a row's contact
TAGS_KEY = "tags"
#: the attribute key whose values must be IANA time zones
TIMEZONE_KEY = "timezone"


@dataclass(frozen=True)
class RejectedRow:
    """A row that was not imported: its spreadsheet row number, column and reason."""

    row_number: int
    column: str | None
    reason: str
    raw: dict[str, str]


@dataclass
class ImportReport:
    """What an import did. ``imported`` counts new contacts, ``updated`` existing ones
    whose stored data changed, ``unchanged`` existing ones it left as they were."""

    import_id: int
    list_id: int
    list_name: str
    filename: str
    rows_read: int = 0
    imported: int = 0
    updated: int = 0
    unchanged: int = 0
    duplicates: int = 0
    invalid: int = 0
    skipped_opted_out: int = 0
    rejects: list[RejectedRow] = field(default_factory=list)
    phone_column: str = ""
    name_column: str | None = None
    attribute_columns: list[str] = field(default_factory=list)
    attribute_keys: dict[str, str] = field(default_factory=dict)
    columns: list[str] = field(default_factory=list)
    region: str = "US"
    tags_column: str | None = None
    #: every tag the import gave (from ``tags`` and the ``tags`` column), sorted
    tags: list[str] = field(default_factory=list)
    #: what one numbered record of the file is: a spreadsheet ``row`` or a vCard ``card``
    record: str = "row"
    #: an opt-out file: ``imported`` counts new contacts created opted out, ``updated``
    #: existing ones now opted out, ``unchanged`` those already opted out
    opt_out: bool = False

    def to_dict(self, *, include_rejects: bool = True) -> dict[str, Any]:
        """JSON-friendly form (what ``--json`` prints)."""
        out = asdict(self)
        if self.opt_out:
            out["list_id"] = out["list_name"] = None
        if not include_rejects:
            out.pop("rejects")
        return out

    def write_rejects(self, path: Path) -> int:
        """Write the rejected rows as a CSV file; returns how many rows were written.

        The file holds ``row_number``, ``column`` and ``reason`` followed by the row's
        cells as they were; read back with :func:`campaigns.spreadsheets.read_table`,
        the original columns hold the same text.
        """
        with path.open("w", encoding="utf-8", newline="") as fh:
            write_rejects_csv(fh, self.columns, self.rejects)
        return len(self.rejects)


class _Reject(Protocol):
    @property
    def row_number(self) -> int: ...
    @property
    def column(self) -> str | None: ...
    @property
    def reason(self) -> str: ...
    @property
    def raw(self) -> Mapping[str, Any]: ...


def write_rejects_csv(
    out: Any, columns: Sequence[str], rejects: Iterable[_Reject], *, header: bool = True
) -> None:
    """Write rejected rows to the text stream ``out`` as CSV: ``row_number``, ``column``
    and ``reason`` (renamed ``gatecast_...`` if the file has such a column), then the
    row's ``columns`` as they were (the CLI's ``--rejects`` file and the API's CSV)."""
    writer = csv.writer(out)
    if header:
        writer.writerow([*_reject_columns(columns), *columns])
    for r in rejects:
        writer.writerow(
            [r.row_number, r.column or "", r.reason, *(r.raw.get(c, "") for c in columns)]
        )


@dataclass(frozen=True)
class Preview:
    """The detected mapping and the first rows of a file (nothing written)."""

    filename: str
    columns: list[str]
    phone_column: str | None
    name_column: str | None
    attribute_columns: list[str]
    attribute_keys: dict[str, str]
    rows: list[dict[str, str]]
    phones: list[PhoneResult]
    sheet: str | None
    encoding: str | None
    delimiter: str | None
    problem: str | None = None
    #: the region the phones were read with
    region: str = "US"
    #: the region most local numbers of the file's first rows fit, when not ``region``
    region_hint: RegionHint | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form."""
        out = asdict(self)
        out["phones"] = [{"e164": p.e164, "reason": p.reason} for p in self.phones]
        hint = self.region_hint
        out["region_hint"] = None if hint is None else {**hint._asdict(), "message": hint.message}
        return out


@dataclass(frozen=True)
class _Mapping:
    phone: str
    name: str | None
    first_last: tuple[str, str] | None
    attributes: list[str]
    keys: dict[str, str]
    #: the phone columns in the order they are tried, each with its type column (Google)
    phones: tuple[tuple[str, str | None], ...] = ()
    #: the column of comma-separated tags (not an attribute), if any
    tags: str | None = None

    @property
    def name_label(self) -> str | None:
        joined = f"{self.first_last[0]} + {self.first_last[1]}" if self.first_last else None
        if self.name and joined:
            return f"{self.name} (else {joined})"
        return self.name or joined


# --- column mapping ------------------------------------------------------------------


def header_key(header: str) -> str:
    """A header folded for matching: no accents, case, spaces or punctuation."""
    decomposed = unicodedata.normalize("NFKD", header)
    plain = "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    return re.sub(r"[\W_]+", "", plain.casefold())


def attribute_key(header: str) -> str:
    """The template-friendly attribute key of a header (``"Plan Type"`` -> ``plan_type``)."""
    key = re.sub(r"\W+", "_", header.strip().casefold()).strip("_")
    if not key:
        return "column"
    return f"col_{key}" if key[0].isdigit() else key


def _find(columns: Sequence[str], words: Sequence[str]) -> str | None:
    keyed: dict[str, str] = {}
    for col in columns:
        keyed.setdefault(header_key(col), col)
    for word in words:
        if word in keyed:
            return keyed[word]
    return None


def _named(path: Path, columns: Sequence[str], wanted: str, what: str) -> str:
    if wanted in columns:
        return wanted
    folded = [c for c in columns if header_key(c) == header_key(wanted)]
    if len(folded) == 1:
        return folded[0]
    raise ImportFailed(
        f"{path}: no column named {wanted!r} for the {what}; columns: {', '.join(columns)}"
    )


def _google_pairs(columns: Sequence[str]) -> list[tuple[str, str | None]]:
    """Google Contacts' ``Phone N - Value`` columns with their ``Phone N - Type`` (or
    ``- Label``) columns, by N."""
    keyed = {header_key(c): c for c in reversed(columns)}
    pairs: list[tuple[int, str, str | None]] = []
    for key, col in keyed.items():
        found = _GOOGLE_VALUE.fullmatch(key)
        if found:
            n = found.group(1)
            kind = keyed.get(f"phone{n}type") or keyed.get(f"phone{n}label")
            pairs.append((int(n), col, kind))
    return [(col, kind) for _, col, kind in sorted(pairs)]


def _phone_columns(columns: Sequence[str]) -> list[tuple[str, str | None]]:
    """The phone columns found by their headers, in the order each row tries them."""
    pairs = _google_pairs(columns)
    if pairs:
        return pairs
    keys = [header_key(c) for c in columns]
    found = [i for i, k in enumerate(keys) if k in PHONE_HEADERS or _PHONE_COLUMN.fullmatch(k)]
    if len(found) > 1:  # "Number" next to real phone columns is something else
        found = [i for i in found if keys[i] not in _GENERIC_PHONE_HEADERS] or found[:1]
    if not found:
        first = next((c for hint in PHONE_HINTS for c in columns if hint in header_key(c)), None)
        return [] if first is None else [(first, None)]
    if len(found) == 1:
        return [(columns[found[0]], None)]
    primary = _find([columns[i] for i in found], PHONE_HEADERS)

    def rank(i: int) -> tuple[int, int]:
        if _MOBILE_WORDS.search(keys[i]):
            return (0, i)
        return (1 if columns[i] == primary or keys[i].startswith("primary") else 2, i)

    return [(columns[i], None) for i in sorted(found, key=rank)]


@dataclass(frozen=True)
class _HeaderTest:
    """Whether a row of cells is the header row: it has the phone column (the one named,
    else one found by its header). An object, not a closure: it goes to the child that
    reads a workbook (:mod:`campaigns.untrusted_files`)."""

    phone_column: str | None

    def __call__(self, cells: Sequence[str]) -> bool:
        if self.phone_column:
            wanted = header_key(self.phone_column)
            return any(header_key(c) == wanted for c in cells)
        return bool(_phone_columns([c.strip() for c in cells if c.strip()]))


def _header_test(opts: ImportOptions) -> HeaderTest:
    """Whether a row of cells is the header row: it has the phone column."""
    return _HeaderTest(opts.phone_column)


def map_columns(path: Path, columns: Sequence[str], opts: ImportOptions) -> _Mapping:
    """Choose the phone, name and attribute columns (errors name the file and headers)."""
    phones: list[tuple[str, str | None]]
    if opts.phone_column:
        phones = [(_named(path, columns, opts.phone_column, "phone number"), None)]
    else:
        phones = _phone_columns(columns)
        if not phones:
            raise ImportFailed(
                f"{path}: no phone column found among the headers: {', '.join(columns)}; "
                "name it with --phone-column"
            )
    phone = ", ".join(col for col, _ in phones)
    phone_cells = {c for pair in phones for c in pair if c is not None}
    rest = [c for c in columns if c not in phone_cells]
    name: str | None = None
    first_last: tuple[str, str] | None = None
    if opts.name_column:
        name = _named(path, rest, opts.name_column, "name")
    else:
        name = _find(rest, NAME_HEADERS)
        first, last = _find(rest, FIRST_NAME_HEADERS), _find(rest, LAST_NAME_HEADERS)
        if first and last:
            first_last = (first, last)
        elif first and name is None:
            name = first
    attributes = [c for c in rest if c != name]
    tags = next((c for c in attributes if attribute_key(c) == TAGS_KEY), None)
    chosen = _chosen_keys(path, columns, attributes, opts.attributes)
    if tags is not None and tags in chosen:  # the user said what the tags column is
        tags = tags if chosen[tags] == TAGS_KEY else None
    attributes = [c for c in attributes if c != tags and chosen.get(c) != ""]
    keys: dict[str, str] = {}
    used = {k for k in chosen.values() if k}
    for col in attributes:
        if chosen.get(col):
            keys[col] = chosen[col]
            continue
        key = base = attribute_key(col)
        n = 2
        while key in used:
            key, n = f"{base}_{n}", n + 1
        used.add(key)
        keys[col] = key
    return _Mapping(phone, name, first_last, attributes, keys, tuple(phones), tags)


def _chosen_keys(
    path: Path,
    columns: Sequence[str],
    attributes: Sequence[str],
    wanted: Sequence[tuple[str, str]],
) -> dict[str, str]:
    """The user's attribute keys by column (``""``: leave the column out), checked: each
    names a column that is not the phone or name column, and no two share a key."""
    chosen: dict[str, str] = {}
    owner: dict[str, str] = {}
    for column, key in wanted:
        try:
            col = _named(path, columns, column, "attribute")
        except ImportFailed as exc:
            raise MappingFailed(str(exc)) from None
        if col not in attributes:
            if not key.strip():
                continue  # leaving out the phone or name column changes nothing
            raise MappingFailed(
                f"{path}: column {col!r} is the phone or name column: "
                "it cannot also be an attribute"
            )
        clean = attribute_key(key) if key.strip() else ""
        if clean and clean in owner and owner[clean] != col:
            raise MappingFailed(
                f"{path}: columns {owner[clean]!r} and {col!r} are both mapped to the "
                f"attribute {clean!r}: give each its own name"
            )
        if clean:
            owner[clean] = col
        chosen[col] = clean
    return chosen


def _phone_values(frame: pd.DataFrame, mapping: _Mapping) -> pd.Series:
    """Each row's phone cell: the one phone column, or of several the first non-empty
    value typed mobile (Google), then the first non-empty value (module notes)."""
    if len(mapping.phones) == 1 and mapping.phones[0][1] is None:
        return frame[mapping.phones[0][0]]
    values: list[pd.Series] = []
    mobile: list[pd.Series] = []
    for col, kind in mapping.phones:
        value = frame[col]
        if value.str.contains(_MULTI_VALUE_SEP, regex=False).any():
            value = value.str.split(_MULTI_VALUE_SEP, n=1).str[0]
        values.append(value.str.strip())
        if kind is not None:
            mobile.append(frame[kind].str.casefold().str.contains(_MOBILE_WORDS))
    picked = pd.Series("", index=frame.index, dtype=object)
    for value, is_mobile in zip(values, mobile, strict=False):
        picked = picked.mask((picked == "") & is_mobile & (value != ""), value)
    for value in values:
        picked = picked.mask((picked == "") & (value != ""), value)
    return picked


def _names(frame: pd.DataFrame, mapping: _Mapping) -> pd.Series:
    """Each row's name: the name column, else first and last name joined."""
    joined: pd.Series | None = None
    if mapping.first_last:
        first, last = (blank_placeholders(frame[c]).str.strip() for c in mapping.first_last)
        joined = (first + " " + last).str.strip()
    if mapping.name:
        names = blank_placeholders(frame[mapping.name]).str.strip()
        return names if joined is None else names.mask(names == "", joined)
    if joined is not None:
        return joined
    return pd.Series("", index=frame.index, dtype=object)


# --- preview ------------------------------------------------------------------------


def _read(path: Path, opts: ImportOptions, nrows: int | None = None) -> Any:
    """The file as a table: a workbook read in a child within ``opts.parse_limits``
    (:mod:`campaigns.untrusted_files`), CSV and vCard here."""
    limits = TableLimits(opts.max_columns, opts.max_rows, opts.max_cell_chars)
    try:
        if is_vcard(path):  # a contacts app's export: one row per card
            check_size(path, opts.max_bytes)
            return read_vcards(path, limits=limits)
        if parsed_apart(path):
            check_size(path, opts.max_bytes)
            return read_apart(
                path,
                sheet=opts.sheet,
                max_uncompressed=opts.xlsx_max_uncompressed_bytes,
                engine=opts.excel_engine,
                nrows=nrows,
                is_header=_header_test(opts),
                limits=limits,
                parse=opts.parse_limits,
            )
        return read_table(
            path,
            sheet=opts.sheet,
            encoding=opts.encoding,
            delimiter=opts.delimiter,
            max_bytes=opts.max_bytes,
            max_uncompressed=opts.xlsx_max_uncompressed_bytes,
            engine=opts.excel_engine,
            nrows=nrows,
            is_header=_header_test(opts),
            limits=limits,
        )
    except SpreadsheetError as exc:
        raise ImportFailed(str(exc)) from None


def preview_file(path: Path, opts: ImportOptions, rows: int = 5, *, hint: bool = True) -> Preview:
    """The columns, the detected mapping and the first ``rows`` rows; no database writes.

    A file whose phone column cannot be found still previews, with ``problem`` set.
    With ``hint``, :data:`HINT_ROWS` rows are read for ``region_hint``
    (:func:`campaigns.phones.region_hint`); a :class:`MappingFailed` is raised.
    """
    opts = checked_options(opts)
    table = _read(path, opts, nrows=max(rows, HINT_ROWS) if hint else rows)
    columns = table.columns
    head = table.frame.head(rows)
    records = [
        {c: str(v) for c, v in zip(columns, rec, strict=True)}
        for rec in head.itertuples(index=False)
    ]
    try:
        mapping = map_columns(path, columns, opts)
    except MappingFailed:
        raise
    except ImportFailed as exc:
        return Preview(
            path.name, columns, None, None, [], {}, records, [], table.sheet,
            table.encoding, table.delimiter, problem=str(exc), region=opts.region,
        )  # fmt: skip
    raw_phones = _phone_values(head, mapping).tolist()
    phones = [normalise_phone(str(raw), opts.region) for raw in raw_phones]
    found = region_hint(_phone_values(table.frame, mapping).tolist(), opts.region) if hint else None
    return Preview(
        path.name, columns, mapping.phone, mapping.name_label, mapping.attributes,
        mapping.keys, records, phones, table.sheet, table.encoding, table.delimiter,
        region=opts.region, region_hint=found,
    )  # fmt: skip


#: the rows :func:`preview_file` reads for its region hint
HINT_ROWS = 200


#: the rows :func:`check_file` reads
CHECK_ROWS = 5


def check_file(path: Path, opts: ImportOptions) -> None:
    """Raise :class:`ImportFailed` when the file's head already shows it cannot import.

    Reads :data:`CHECK_ROWS` rows, as :func:`preview_file` does: a file that is not a
    spreadsheet, cannot be decoded or parsed, is empty, breaks a column or cell limit
    there, or has no phone column. What only the whole file can tell (the row limit, a
    bad cell further down) is still found by :func:`import_file`.
    """
    problem = preview_file(path, opts, rows=CHECK_ROWS, hint=False).problem
    if problem:
        raise ImportFailed(problem)


# --- import -------------------------------------------------------------------------


def checked_options(opts: ImportOptions) -> ImportOptions:
    """``opts`` with its region upper-cased; :class:`ImportFailed` for an unknown region."""
    region = opts.region.strip().upper()
    if region not in phonenumbers.SUPPORTED_REGIONS:
        raise ImportFailed(
            f"unknown region {opts.region!r}: use a two-letter ISO 3166 code such as US or GB"
        )
    try:
        tags = tuple(dict.fromkeys(clean_tag(t) for t in opts.tags))
    except ValueError as exc:
        raise ImportFailed(f"--tag: {exc}") from None
    return replace(opts, region=region, tags=tags)


def _reject_columns(columns: Sequence[str]) -> list[str]:
    out = []
    for name in ("row_number", "column", "reason"):
        while name in columns:
            name = f"gatecast_{name}"
        out.append(name)
    return out


def _rejects_for(
    frame: pd.DataFrame, mask: np.ndarray[Any, Any], column: str, reasons: Sequence[str]
) -> list[RejectedRow]:
    bad = frame[mask]
    cols = [str(c) for c in frame.columns]
    out = []
    for row_number, rec, reason in zip(
        bad.index, bad.itertuples(index=False), reasons, strict=True
    ):
        raw = {c: str(v) for c, v in zip(cols, rec, strict=True)}
        out.append(RejectedRow(int(row_number), column, reason, raw))
    return out


def _start_job(engine: Engine, filename: str, opts: ImportOptions, now: datetime) -> int:
    with engine.begin() as conn:
        result = conn.execute(
            insert(imports).values(
                filename=filename[:500],
                status="running",
                region=opts.region,
                started_at=now,
                runner=runner_id(),
            )
        )
        key = result.inserted_primary_key
        assert key is not None
        return int(key[0])


def _fail_job(engine: Engine, import_id: int, error: str, now: datetime) -> None:
    with engine.begin() as conn:
        conn.execute(
            update(imports)
            .where(imports.c.id == import_id)
            .values(status="failed", error=error[:2000], finished_at=now)
        )


def import_file(
    engine: Engine,
    path: Path,
    opts: ImportOptions,
    *,
    progress: Progress | None = None,
    original_filename: str | None = None,
    now: datetime | None = None,
    batch_size: int = q.BATCH,
    on_start: Callable[[int], None] | None = None,
    catch_up: bool = True,
) -> ImportReport:
    """Import a CSV/XLSX/XLS/ODS or vCard file into the list ``opts.list_name`` (or, with
    ``opts.opt_out``, opt every number of it out: no list).

    Raises :class:`ImportFailed` (message naming the file, row or column) for bad input
    or a database error; contacts and lists are then unchanged and the import job row
    says ``failed``. ``progress(done, total)`` is called as work advances;
    ``on_start(import_id)`` as soon as the job row exists. Imports left ``running`` by a
    killed process are marked failed first (:mod:`campaigns.import_runs`). Once it has
    committed, the contact search catches up with it (``catch_up``;
    :mod:`campaigns.search_index`).
    """
    now = now or utcnow()
    filename = original_filename or path.name
    opts = checked_options(opts)
    try:
        list_name = "" if opts.opt_out else clean_list_name(opts.list_name)
    except ValueError as exc:
        raise ImportFailed(str(exc)) from None
    mark_interrupted_imports(engine, now=utcnow())
    import_id = _start_job(engine, filename, opts, now)
    try:
        if on_start is not None:
            on_start(import_id)
        report = _run(engine, path, opts, import_id, list_name, filename, progress, now, batch_size)
    except ImportFailed as exc:
        _fail_job(engine, import_id, str(exc), utcnow())
        raise
    except BaseException as exc:
        _fail_job(engine, import_id, _describe(exc), utcnow())
        if isinstance(exc, Exception):
            raise ImportFailed(
                f"{path}: import failed, nothing was written ({_describe(exc)})"
            ) from exc
        raise
    try:  # committed: its contacts are found already; this makes finding them fast
        if catch_up:
            catch_up_search(engine)
    except Exception:  # the leader catches up later; the import stands
        log.warning("the contact search will catch up later", exc_info=True)
    return report


def _describe(exc: BaseException) -> str:
    """One line about an unexpected error (a database error without its SQL text)."""
    inner = exc.orig if isinstance(exc, DBAPIError) and exc.orig is not None else exc
    lines = str(inner).strip().splitlines()
    return f"{type(inner).__name__}: {lines[0] if lines else ''}".strip()


def _run(
    engine: Engine,
    path: Path,
    opts: ImportOptions,
    import_id: int,
    list_name: str,
    filename: str,
    progress: Progress | None,
    now: datetime,
    batch_size: int,
) -> ImportReport:
    table = _read(path, opts)
    frame = table.frame
    columns = table.columns
    mapping = map_columns(path, columns, opts)
    if frame.empty:  # a list of nobody is a mistake (the wrong file, an export cut short)
        raise ImportFailed(
            f"{path}: no contacts to import: the file has a header row "
            f"({', '.join(columns)}) but no rows under it; nothing was imported"
        )
    report = ImportReport(
        import_id=import_id,
        list_id=0,
        list_name=list_name,
        filename=filename,
        rows_read=len(frame),
        phone_column=mapping.phone,
        name_column=mapping.name_label,
        attribute_columns=list(mapping.attributes),
        attribute_keys=dict(mapping.keys),
        columns=columns,
        region=opts.region,
        record="card" if is_vcard(path) else "row",
        opt_out=opts.opt_out,
    )

    # 1. phones: each distinct raw value normalised once
    phone_values = _phone_values(frame, mapping)
    codes, uniques = pd.factorize(phone_values, sort=False)
    n_unique = len(uniques)
    total = n_unique + len(frame)
    e164_u = np.empty(n_unique, dtype=object)
    reason_u = np.empty(n_unique, dtype=object)
    step = max(1000, n_unique // 20)
    unique_values = uniques.tolist()
    for start in range(0, n_unique, step):
        stop = min(start + step, n_unique)
        e164_u[start:stop], reason_u[start:stop] = normalise_batch(
            unique_values[start:stop], opts.region
        )
        if progress is not None:
            progress(stop, total)
    del unique_values
    e164 = e164_u[codes] if len(frame) else np.empty(0, dtype=object)
    reasons = reason_u[codes] if len(frame) else np.empty(0, dtype=object)
    invalid = pd.isna(e164)
    if table.mixed_rows:
        mixed = frame.index.isin(list(table.mixed_rows))
        reasons = np.where(
            mixed, REASON_MIXED_ENCODING.format(encoding=table.encoding), reasons
        ).astype(object)
        invalid = invalid | mixed

    # 2. names
    names = _names(frame, mapping)
    too_long = (names.str.len() > NAME_MAX).to_numpy() & ~invalid
    rejects = _rejects_for(frame, invalid, mapping.phone, list(reasons[invalid]))
    if too_long.any():
        label = mapping.name_label or "name"
        rejects += _rejects_for(
            frame, too_long, label, [REASON_NAME_TOO_LONG] * int(too_long.sum())
        )
        rejects.sort(key=lambda r: r.row_number)
    checked = _checked_cells(frame, mapping, ~(invalid | too_long))
    if checked.rejects:
        rejects += checked.rejects
        rejects.sort(key=lambda r: r.row_number)
    report.rejects = rejects
    report.invalid = len(rejects)
    report.tags_column = mapping.tags

    # 3. one row per contact: duplicates merged, last non-empty value wins
    keep = ~(invalid | too_long | checked.bad)
    attr_keys = [mapping.keys[c] for c in mapping.attributes]
    data = pd.DataFrame(
        {
            "p": e164[keep],
            "r": phone_values.to_numpy()[keep],
            "n": names.to_numpy()[keep],
            **{
                f"a{i}": blank_placeholders(frame[c]).to_numpy()[keep]
                for i, c in enumerate(mapping.attributes)
            },
            **(
                {"t": blank_placeholders(frame[mapping.tags]).to_numpy()[keep]}
                if mapping.tags
                else {}
            ),
        }
    )
    del table, frame, names, e164, reasons, e164_u, reason_u, codes, uniques  # memory
    del phone_values
    n_valid = len(data)
    data = _merge_duplicates(data)
    report.duplicates = n_valid - len(data)
    # staged in phone order, so the unique index on contacts.phone grows at its end
    order = _phone_order(data["p"].tolist())
    phones = data["p"].to_numpy()[order].tolist()
    raw_phones = [p.strip()[:RAW_PHONE_MAX] for p in data["r"].to_numpy()[order].tolist()]
    contact_names = data["n"].to_numpy()[order].tolist()
    attributes = _AttributeEncoder(data, attr_keys, order)
    folded = _AttributeEncoder(data, attr_keys, order, fold=True)
    row_tags = data["t"].to_numpy()[order].tolist() if mapping.tags else []
    del data
    n_contacts = len(phones)
    steps = n_unique + n_contacts

    # 4. one transaction: stage the contacts, then set-based upsert and membership
    with engine.begin() as conn:
        take_write_lock(conn)  # it reads before it writes (the opt-out path first of all)
        if not opts.opt_out:
            report.list_id, _ = q.ensure_list(conn, list_name, now)
        q.create_stage(conn)
        for start in range(0, n_contacts, batch_size):
            stop = min(start + batch_size, n_contacts)
            q.stage_rows(
                conn,
                zip(
                    phones[start:stop],
                    raw_phones[start:stop],
                    contact_names[start:stop],
                    attributes.rows(start, stop),
                    folded.rows(start, stop),
                    [fold_value(n) for n in contact_names[start:stop]],
                    strict=True,
                ),
            )
            if progress is not None:
                progress(n_unique + stop, steps)
        pairs = _tag_pairs(phones, row_tags)
        tag_ids = aq.ensure_tags(conn, {*opts.tags, *(t for _, t in pairs)}, now)
        report.tags = sorted(tag_ids)
        del phones, raw_phones, contact_names, attributes, folded, row_tags  # staged
        if opts.opt_out:
            opted = q.opt_out_staged(conn, OPT_OUT_FILE_REASON, now)
            report.imported, report.updated, report.unchanged = opted
        else:
            existing = q.staged_existing(conn)
            report.imported = n_contacts - existing.existing
            report.updated = existing.changed
            report.unchanged = existing.existing - existing.opted_out - existing.changed
            report.skipped_opted_out = existing.opted_out
            q.store_staged(conn, report.list_id, now, existing=existing.existing)
        if pairs:
            aq.stage_tags(conn, [(p, tag_ids[t]) for p, t in pairs])
            aq.add_staged_tags(conn)
        aq.tag_every_staged(conn, q.contact_stage, [tag_ids[t] for t in opts.tags])
        q.drop_stage(conn)
        _store_outcome(conn, report, now)
    if progress is not None:
        progress(steps, steps)
    return report


def _merge_duplicates(data: pd.DataFrame) -> pd.DataFrame:
    """One row per phone (column ``p``): the last non-empty value of each column wins."""
    dup = data["p"].duplicated(keep=False).to_numpy()
    if not dup.any():
        return data
    merged = data[dup].replace("", None).groupby("p", sort=False).last().fillna("").reset_index()
    return pd.concat([data[~dup], merged], ignore_index=True)


def _phone_order(phones: list[str]) -> np.ndarray[Any, Any]:
    """Positions that put E.164 numbers in (nearly) text order, with 8 bytes a number."""
    # "+<digits>" right-padded with zeros to 16 digits sorts numerically as the text does
    # (ties only between numbers that are prefixes of each other; order is a speed aid)
    keys = np.fromiter((int(p[1:17].ljust(16, "0")) for p in phones), np.int64, len(phones))
    return np.argsort(keys, kind="stable")


@dataclass(frozen=True)
class _Checked:
    """Rows refused for a cell of the ``timezone`` or ``tags`` column."""

    bad: np.ndarray[Any, Any]
    rejects: list[RejectedRow]


def _checked_cells(frame: pd.DataFrame, mapping: _Mapping, keep: np.ndarray[Any, Any]) -> _Checked:
    """The rows (among ``keep``) whose time zone is not an IANA zone or whose tags cannot
    be used, each with its reason; every distinct value is checked once."""
    bad = np.zeros(len(frame), dtype=bool)
    rejects: list[RejectedRow] = []
    checks: list[tuple[str, Callable[[str], str | None]]] = []
    zone = next((c for c in mapping.attributes if mapping.keys[c] == TIMEZONE_KEY), None)
    if zone is not None:
        checks.append((zone, timezone_problem))
    if mapping.tags is not None:
        checks.append((mapping.tags, _tags_problem))
    for column, problem in checks:
        values = blank_placeholders(frame[column]).str.strip()
        reasons = {v: r for v in values.unique() if v and (r := problem(str(v)))}
        if not reasons:
            continue
        mask = values.isin(list(reasons)).to_numpy() & keep & ~bad
        rejects += _rejects_for(frame, mask, column, [reasons[v] for v in values[mask]])
        bad |= mask
    return _Checked(bad, rejects)


def _tags_problem(cell: str) -> str | None:
    try:
        for tag in cell.split(","):
            if tag.strip():
                clean_tag(tag)
    except ValueError as exc:
        return str(exc)
    return None


def _tag_pairs(phones: Sequence[str], cells: Sequence[str]) -> list[tuple[str, str]]:
    """``(phone, tag)`` for each tag of each contact's ``tags`` cell (checked before)."""
    out: list[tuple[str, str]] = []
    for phone, cell in zip(phones, cells, strict=False):
        if cell:
            out.extend(
                (phone, t)
                for t in dict.fromkeys(clean_tag(x) for x in cell.split(",") if x.strip())
            )
    return out


class _AttributeEncoder:
    """Builds the attributes JSON of any slice of contacts from per-value fragments
    (``fold``: the values as an audience compares them, :func:`campaigns.segments.fold_value`)."""

    def __init__(
        self,
        data: pd.DataFrame,
        keys: Sequence[str],
        order: np.ndarray[Any, Any],
        *,
        fold: bool = False,
    ) -> None:
        self.columns: list[tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]] = []
        for i, key in enumerate(keys):
            codes, uniques = pd.factorize(data[f"a{i}"], sort=False)
            prefix = ", " + json.dumps(key) + ": "
            values = [str(u).strip() for u in uniques]
            fragments = [
                prefix + json.dumps(fold_value(v) if fold else v) if v else "" for v in values
            ]
            # code -1 (a missing value) picks the trailing ""; empty cells are left out
            self.columns.append((codes[order], np.array([*fragments, ""], dtype=object)))

    def rows(self, start: int, stop: int) -> list[str]:
        """The JSON objects of contacts ``start`` to ``stop``."""
        if not self.columns:
            return ["{}"] * (stop - start)
        out: np.ndarray[Any, Any] = np.full(stop - start, "", dtype=object)
        for codes, fragments in self.columns:
            out = out + fragments[codes[start:stop]]
        return ["{" + s[2:] + "}" for s in out]


def _store_outcome(conn: Connection, report: ImportReport, now: datetime) -> None:
    q.insert_rejects(
        conn,
        report.import_id,
        [
            {"row_number": r.row_number, "column": r.column, "reason": r.reason, "raw": r.raw}
            for r in report.rejects
        ],
    )
    conn.execute(
        update(imports)
        .where(imports.c.id == report.import_id)
        .values(
            list_id=report.list_id or None,
            status="completed",
            phone_column=report.phone_column[:200],
            name_column=report.name_column[:200] if report.name_column else None,
            rows_read=report.rows_read,
            imported=report.imported,
            updated=report.updated,
            duplicates=report.duplicates,
            invalid=report.invalid,
            skipped_opted_out=report.skipped_opted_out,
            finished_at=now,
        )
    )


__all__ = [
    "CHECK_ROWS",
    "EMPTY_PLACEHOLDERS",
    "HINT_ROWS",
    "OPT_OUT_FILE_REASON",
    "ImportFailed",
    "ImportOptions",
    "ImportReport",
    "MappingFailed",
    "Preview",
    "RejectedRow",
    "attribute_key",
    "blank_placeholders",
    "check_file",
    "checked_options",
    "header_key",
    "import_file",
    "map_columns",
    "preview_file",
    "write_rejects_csv",
]
