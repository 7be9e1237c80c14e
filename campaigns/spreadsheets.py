"""Reading CSV, XLSX, XLS and ODS files safely, every cell as text.

- Every cell is text: no float phone numbers, "NA"/"None"/"null" stay as written, no
  leading zero or "+" is dropped. Numbers stored as numbers in Excel cells become their
  integer text when integral (``447911123456.0`` -> ``"447911123456"``).
- CSV encodings: UTF-8 (with or without BOM), UTF-16 (BOM), else cp1252 (latin-1 for the
  few bytes cp1252 leaves undefined). Delimiter sniffed among comma, semicolon, tab, pipe.
- Limits before parsing: file size, and for the zip formats (XLSX, ODS) the sum of the
  members' uncompressed sizes and their compression ratio (zip bombs); for XLSX the
  sheet's cell references, scanned as the XML streams (:func:`sheet_extent`): cells
  beyond the column or row limit, or a sheet mostly empty between its cells (a reader
  fills every empty cell in: A1 and XFD1048576 alone would take 512 GB), are refused
  before the reader sees the file; a CSV header row
  wider than :attr:`TableLimits.columns` is refused while it streams in (64 KiB at a
  time), before pandas sees the file. While reading: at most :attr:`TableLimits.rows`
  data rows are read (one more is refused), and a cell longer than
  :attr:`TableLimits.cell_chars` is refused naming its row and column.
- Mixed encodings: a CSV that is not all UTF-8 is checked line by line; when some lines
  are UTF-8 and others not, the file is read in the encoding most of those lines use and
  the other lines are listed in :attr:`Table.mixed_rows` (the importer rejects them
  rather than store them as mojibake).
- NUL characters are removed from every cell and header (PostgreSQL cannot store them,
  SQLite can: both databases get the same text).
- The header row is the first row, unless a caller's ``is_header`` test picks a later
  one among the first :data:`HEADER_SEARCH_ROWS` rows and every row above it has fewer
  non-empty cells (a title such as "Customer export 2026-11", blank rows).
- Rows keep their spreadsheet row number (a header in row 1 puts the first data row in
  row 2) as the frame's index; rows whose cells are all empty are dropped.
"""

from __future__ import annotations

import codecs
import csv
import io
import posixpath
import re
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from campaigns.file_types import (
    WORKBOOK_SUFFIXES,
    ZIP_WORKBOOK_SUFFIXES,
    not_text,
    unsupported_problem,
)

DEFAULT_MAX_BYTES = 200 * 1024 * 1024
DEFAULT_MAX_UNCOMPRESSED = 1024 * 1024 * 1024
DEFAULT_MAX_COLUMNS = 1_000
DEFAULT_MAX_ROWS = 2_000_000
DEFAULT_MAX_CELL_CHARS = 32_767  # Excel's own limit for a cell
#: a zip member that expands more than this many times (and by more than 1 MB) is refused
MAX_COMPRESSION_RATIO = 200
_RATIO_MIN_BYTES = 1024 * 1024
_DELIMITERS = (",", ";", "\t", "|")
_EXCEL_SUFFIXES = frozenset(WORKBOOK_SUFFIXES)
_ZIP_SUFFIXES = frozenset(ZIP_WORKBOOK_SUFFIXES)
_SNIFF_BYTES = 64 * 1024
#: how many rows from the top may hold the header row (rows above it: titles, blanks)
HEADER_SEARCH_ROWS = 10
#: a sheet spanning more cells than this must have at least one cell in
#: :data:`SPARSE_RATIO` holding something (its readers allocate every cell of the span)
SPARSE_MIN_CELLS = 1_000_000
SPARSE_RATIO = 100
_XML_CHUNK = 1024 * 1024
#: the most bytes of workbook.xml and its relationships read to find a sheet's part
_WORKBOOK_XML_MAX = 16 * 1024 * 1024

#: a caller's test of whether a row of cells (as text) is the header row
HeaderTest = Callable[[Sequence[str]], bool]

ExcelEngine = Literal["calamine", "openpyxl"]


class SpreadsheetError(ValueError):
    """A file that cannot be read; the message names the file and the problem."""


@dataclass(frozen=True)
class TableLimits:
    """The most one sheet may hold (settings ``GATECAST_IMPORT_MAX_COLUMNS``, ``..._ROWS``,
    ``..._CELL_CHARS``)."""

    columns: int = DEFAULT_MAX_COLUMNS
    rows: int = DEFAULT_MAX_ROWS
    cell_chars: int = DEFAULT_MAX_CELL_CHARS

    def too_many_columns(self, path: Path | str) -> SpreadsheetError:
        """The error for a header wider than :attr:`columns`."""
        return SpreadsheetError(
            f"{path}: the header row has more than {self.columns:,} columns, "
            f"over the import limit of {self.columns:,} columns"
        )

    def too_many_rows(self, path: Path | str) -> SpreadsheetError:
        """The error for a sheet longer than :attr:`rows`."""
        return SpreadsheetError(
            f"{path}: more than {self.rows:,} rows, over the import limit of {self.rows:,} rows"
        )


@dataclass(frozen=True)
class Table:
    """A sheet read as text: ``frame`` columns are the headers, its index the row numbers."""

    path: Path
    frame: pd.DataFrame
    sheet: str | None = None
    encoding: str | None = None
    delimiter: str | None = None
    header_row: int = 1
    #: row numbers written in another encoding than ``encoding`` (mixed-encoding CSV)
    mixed_rows: frozenset[int] = frozenset()

    @property
    def columns(self) -> list[str]:
        """The header names, stripped, in file order."""
        return [str(c) for c in self.frame.columns]


def is_excel(path: Path) -> bool:
    """Whether ``path`` is read as a workbook (by its suffix) rather than as CSV."""
    return path.suffix.lower() in _EXCEL_SUFFIXES


def check_size(path: Path, max_bytes: int) -> int:
    """The file's size; :class:`SpreadsheetError` if it is missing or over ``max_bytes``."""
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise SpreadsheetError(f"{path}: cannot read file ({exc.strerror})") from None
    if size > max_bytes:
        raise SpreadsheetError(
            f"{path}: file is {size:,} bytes, over the import limit of {max_bytes:,} bytes"
        )
    return size


def check_zip_budget(
    path: Path,
    max_uncompressed: int = DEFAULT_MAX_UNCOMPRESSED,
    max_ratio: int = MAX_COMPRESSION_RATIO,
) -> int:
    """Refuse a zip-based workbook that would expand too far; returns the expanded size.

    Reads only the zip directory (``infolist``), never the members.
    """
    try:
        with zipfile.ZipFile(path) as archive:
            infos = archive.infolist()
    except zipfile.BadZipFile:
        raise SpreadsheetError(f"{path}: not a valid {path.suffix} file (bad zip)") from None
    total = 0
    for info in infos:
        total += info.file_size
        if info.file_size > _RATIO_MIN_BYTES:
            ratio = info.file_size / max(info.compress_size, 1)
            if ratio > max_ratio:
                raise SpreadsheetError(
                    f"{path}: member {info.filename} expands {ratio:.0f} times "
                    f"(limit {max_ratio}): refusing a possible zip bomb"
                )
    if total > max_uncompressed:
        raise SpreadsheetError(
            f"{path}: expands to {total:,} bytes, over the limit of {max_uncompressed:,} bytes"
        )
    return total


def header_index(rows: Sequence[Sequence[str]], is_header: HeaderTest | None) -> int:
    """The 0-based position of the header among the first rows (0 unless ``is_header``
    picks a later row that has more non-empty cells than every row above it)."""
    if is_header is None:
        return 0
    counts: list[int] = []
    for i, row in enumerate(rows[:HEADER_SEARCH_ROWS]):
        filled = sum(1 for cell in row if cell.strip())
        if is_header(row) and (i == 0 or filled > max(counts)):
            return i
        counts.append(filled)
    return 0


# --- CSV ---------------------------------------------------------------------------


def detect_encoding(path: Path) -> str:
    """UTF-8 (BOM or not), UTF-16 by BOM, else cp1252 (or latin-1 if cp1252 cannot)."""
    with path.open("rb") as fh:
        head = fh.read(4)
        if head.startswith(codecs.BOM_UTF8):
            return "utf-8-sig"
        if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
            return "utf-16"
        fh.seek(0)
        for candidate in ("utf-8", "cp1252"):
            decoder = codecs.getincrementaldecoder(candidate)("strict")
            fh.seek(0)
            try:
                while chunk := fh.read(1 << 20):
                    decoder.decode(chunk)
                decoder.decode(b"", final=True)
            except UnicodeDecodeError:
                continue
            return candidate
    return "latin-1"


def mixed_lines(path: Path, encoding: str) -> tuple[str, frozenset[int]]:
    """For a CSV read as cp1252/latin-1 (not all UTF-8): the encoding most of its non-ASCII
    lines use, and the 1-based numbers of the lines written in the other one.

    A line with bytes past ASCII that decodes as UTF-8 is taken as UTF-8 (cp1252 text
    rarely forms valid UTF-8 sequences); one that does not is taken as cp1252.
    """
    if encoding not in ("cp1252", "latin-1"):
        return encoding, frozenset()
    utf8: list[int] = []
    other: list[int] = []
    with path.open("rb") as fh:
        for number, line in enumerate(fh, 1):
            if line.isascii():
                continue
            try:
                line.decode("utf-8")
            except UnicodeDecodeError:
                other.append(number)
            else:
                utf8.append(number)
    if not utf8:
        return encoding, frozenset()
    if len(utf8) >= len(other):
        return "utf-8", frozenset(other)
    return encoding, frozenset(utf8)


def sniff_delimiter(sample: str) -> str:
    """The delimiter among , ; tab | that splits the first lines most consistently."""
    lines = [line for line in sample.splitlines()[:20] if line.strip()]
    if not lines:
        return ","
    try:
        dialect = csv.Sniffer().sniff("\n".join(lines), delimiters="".join(_DELIMITERS))
        if dialect.delimiter in _DELIMITERS:
            return str(dialect.delimiter)
    except csv.Error:
        pass
    counts = {d: lines[0].count(d) for d in _DELIMITERS}
    best = max(_DELIMITERS, key=lambda d: counts[d])
    return best if counts[best] else ","


def check_header_width(path: Path, encoding: str, sep: str, skip: int, limit: int) -> None:
    """Refuse a CSV whose header row (after ``skip`` rows) has more than ``limit`` columns.

    Streams the file 64 KiB at a time and stops at the header's end: a header of a million
    columns is refused without being held in memory.
    """
    row = 0
    columns = 1
    quoted = False
    with path.open("r", encoding=encoding, errors="replace", newline="") as fh:
        while chunk := fh.read(_SNIFF_BYTES):
            for ch in chunk:
                if ch == '"':
                    quoted = not quoted
                elif quoted:
                    continue
                elif ch == "\n":
                    if row == skip:
                        return
                    row += 1
                elif ch == sep and row == skip:
                    columns += 1
                    if columns > limit:
                        raise TableLimits(columns=limit).too_many_columns(path)


def _read_sample(path: Path, encoding: str) -> str:
    with path.open("r", encoding=encoding, errors="replace", newline="") as fh:
        return fh.read(_SNIFF_BYTES)


def read_csv(
    path: Path,
    *,
    encoding: str | None = None,
    delimiter: str | None = None,
    nrows: int | None = None,
    is_header: HeaderTest | None = None,
    limits: TableLimits = TableLimits(),
) -> Table:
    """Read a CSV file as text (see the module notes)."""
    enc = encoding or detect_encoding(path)
    mixed: frozenset[int] = frozenset()
    if encoding is None:
        enc, mixed = mixed_lines(path, enc)
    sample = _read_sample(path, enc)
    with path.open("rb") as fh:
        kind = not_text(fh.read(16), sample)
    if kind is not None:
        raise SpreadsheetError(
            f"{path}: not a CSV file: it is {kind}. A CSV file is text, one contact a line "
            "(export your contacts as CSV, Excel or vCard and import that file)"
        )
    sep = delimiter or sniff_delimiter(sample)
    skip = 0
    if is_header is not None:
        # titles above the header can mislead the sniffer: try the other delimiters too
        tried = [sep] if delimiter else [sep, *(d for d in _DELIMITERS if d != sep)]
        for candidate in tried:
            rows = _first_rows(sample, candidate)
            skip = header_index(rows, is_header)
            if skip or (rows and is_header(rows[0])):
                sep = candidate
                break
        if skip and delimiter is None:
            sep = sniff_delimiter("\n".join(sample.splitlines()[skip:]))
    check_header_width(path, enc, sep, skip, limits.columns)
    wanted = limits.rows + 1 if nrows is None else min(nrows, limits.rows + 1)
    try:
        frame = pd.read_csv(
            path,
            sep=sep,
            dtype=str,
            keep_default_na=False,
            na_filter=False,
            skip_blank_lines=False,
            encoding=enc,
            encoding_errors="replace" if mixed else "strict",
            nrows=wanted,
            skiprows=skip,
            engine="c",
        )
    except pd.errors.EmptyDataError:
        raise SpreadsheetError(f"{path}: the file is empty (no header row)") from None
    except pd.errors.ParserError as exc:
        raise SpreadsheetError(f"{path}: {_parse_problem(exc, skip)}") from None
    except UnicodeDecodeError as exc:
        raise SpreadsheetError(f"{path}: not valid {enc} text ({exc.reason})") from None
    if len(frame) > limits.rows:
        raise limits.too_many_rows(path)
    frame = _finish(path, frame, first_row=skip + 2, limits=limits)
    return Table(path, frame, encoding=enc, delimiter=sep, header_row=skip + 1, mixed_rows=mixed)


_FIELDS = re.compile(r"Expected (\d+) fields in line (\d+), saw (\d+)")


def _parse_problem(exc: Exception, skip: int) -> str:
    """A CSV parser's complaint in the user's terms (a line's cells, not a tokenizer)."""
    found = _FIELDS.search(str(exc))
    if found is None:
        return "not a well-formed CSV file (a quote left open, or not CSV at all)"
    header, line, saw = (int(g) for g in found.groups())
    return (
        f"line {line + skip} has {saw} cells but the header row has {header}: not a "
        "well-formed CSV file (a cell with the delimiter in it needs quotes)"
    )


def _first_rows(sample: str, sep: str) -> list[list[str]]:
    """The first rows of a CSV sample (a row cut by the sample's end is left out)."""
    rows: list[list[str]] = []
    try:
        for row in csv.reader(io.StringIO(sample), delimiter=sep):
            rows.append(row)
            if len(rows) > HEADER_SEARCH_ROWS:
                break
    except csv.Error:
        pass
    return rows[:HEADER_SEARCH_ROWS]


# --- workbooks ---------------------------------------------------------------------


def cell_text(value: Any) -> str:
    """A workbook cell as text: integral floats without ``.0``, dates in ISO form."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 1e17:
            return str(int(value))
        return repr(value)
    if isinstance(value, datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, date | time):
        return value.isoformat()
    if isinstance(value, timedelta):
        return str(value)
    return str(value)


def _sheet_name(path: Path, names: list[str], sheet: str | int | None) -> str:
    if not names:
        raise SpreadsheetError(f"{path}: the workbook has no sheets")
    if sheet is None:
        return names[0]
    if isinstance(sheet, int):
        if 0 <= sheet < len(names):
            return names[sheet]
        raise SpreadsheetError(f"{path}: no sheet number {sheet + 1}; sheets: {', '.join(names)}")
    if sheet in names:
        return sheet
    raise SpreadsheetError(f"{path}: no sheet named {sheet!r}; sheets: {', '.join(names)}")


def _rows_calamine(
    path: Path, sheet: str | int | None, nrows: int | None
) -> tuple[str, list[list[Any]]]:
    import python_calamine

    try:
        workbook = python_calamine.CalamineWorkbook.from_path(str(path))
        name = _sheet_name(path, list(workbook.sheet_names), sheet)
        limit = None if nrows is None else nrows + 1
        rows = workbook.get_sheet_by_name(name).to_python(skip_empty_area=False, nrows=limit)
    except SpreadsheetError:
        raise
    except Exception as exc:  # calamine raises its own error types for broken files
        raise SpreadsheetError(
            f"{path}: cannot read workbook ({type(exc).__name__}: {exc})"
        ) from None
    return name, rows


def _rows_openpyxl(
    path: Path, sheet: str | int | None, nrows: int | None
) -> tuple[str, list[list[Any]]]:
    import openpyxl

    try:
        workbook = openpyxl.load_workbook(path, read_only=True, data_only=True)
    except Exception as exc:
        raise SpreadsheetError(
            f"{path}: cannot read workbook ({type(exc).__name__}: {exc})"
        ) from None
    try:
        name = _sheet_name(path, list(workbook.sheetnames), sheet)
        limit = None if nrows is None else nrows + 1
        rows = [list(r) for r in workbook[name].iter_rows(values_only=True, max_row=limit)]
    finally:
        workbook.close()
    return name, rows


@dataclass(frozen=True)
class Extent:
    """How far a sheet's cells reach (1-based, as Excel numbers them) and how many
    cells it holds: a reader allocates ``rows x columns`` cells, however few hold data."""

    sheet: str
    columns: int
    rows: int
    cells: int

    @property
    def span(self) -> int:
        """The cells a reader fills in: every row up to the last times every column."""
        return self.rows * self.columns

    @property
    def corner(self) -> str:
        """The far corner as the user finds it: ``column XFD, row 1048576``."""
        return f"column {column_letters(self.columns)}, row {self.rows}"

    def check(self, path: Path, limits: TableLimits) -> None:
        """Refuse a sheet reaching past the column or row limit, or one so sparse that
        reading it would mostly fill in empty cells."""
        where = f"{path}, sheet {self.sheet!r}: its cells reach {self.corner}"
        if self.columns > limits.columns or self.rows > limits.rows + HEADER_SEARCH_ROWS:
            raise SpreadsheetError(
                f"{where}: over the limit of {limits.columns:,} columns and {limits.rows:,} rows"
            )
        if self.span > SPARSE_MIN_CELLS and self.span > self.cells * SPARSE_RATIO:
            raise SpreadsheetError(
                f"{where}, but only {self.cells:,} of those {self.span:,} cells hold "
                "anything: a sheet that sparse is refused (reading it would fill in every "
                "empty cell); delete what lies far from the data and save it again"
            )


def column_letters(number: int) -> str:
    """A 1-based column number as Excel writes it (``1`` -> ``A``, ``16384`` -> ``XFD``)."""
    out = ""
    while number > 0:
        number, rest = divmod(number - 1, 26)
        out = chr(ord("A") + rest) + out
    return out or "A"


def _column_number(letters: bytes) -> int:
    number = 0
    for ch in letters.upper():
        number = number * 26 + ch - ord("A") + 1
    return number


# a cell's reference attribute (a row's r="N" has no letters): the column, the row
# (searched for after a literal space: 4x faster; other white space becomes spaces first)
_REF_COLUMN = re.compile(rb' r="([A-Z]{1,7})[0-9]')
_REF_ROW = re.compile(rb' r="[A-Z]{1,7}([0-9]{1,15})"')
_SPACES = bytes.maketrans(b"\t\n\r", b"   ")
_OFFICE_DOCUMENT = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"


def _largest(values: list[bytes]) -> bytes:
    """The largest of column letters or row digits: the longest, then the last in order."""
    width = max(map(len, values))
    return max(v for v in values if len(v) == width)


def _small_xml(archive: zipfile.ZipFile, name: str) -> Any:
    from defusedxml import ElementTree  # no entity expansion, no external entities

    with archive.open(name) as fh:
        data = fh.read(_WORKBOOK_XML_MAX + 1)
    if len(data) > _WORKBOOK_XML_MAX:
        return None
    return ElementTree.fromstring(data)


def _sheet_part(archive: zipfile.ZipFile, sheet: str | int | None) -> tuple[str, str] | None:
    """The name and zip member of the XLSX sheet ``sheet`` names (None: not found)."""
    try:
        book = _small_xml(archive, "xl/workbook.xml")
        rels = _small_xml(archive, "xl/_rels/workbook.xml.rels")
    except (KeyError, SyntaxError, ValueError):  # defusedxml's refusals are ValueErrors
        return None
    if book is None or rels is None:
        return None
    sheets = [
        (str(e.get("name", "")), str(e.get(f"{{{_OFFICE_DOCUMENT}}}id", "")))
        for e in book.iter()
        if e.tag.rsplit("}", 1)[-1] == "sheet"
    ]
    names = [name for name, _ in sheets]
    if not names or (isinstance(sheet, int) and not 0 <= sheet < len(names)):
        return None
    if isinstance(sheet, str) and sheet not in names:
        return None
    index = sheet if isinstance(sheet, int) else 0 if sheet is None else names.index(sheet)
    name, rel_id = sheets[index]
    targets = {str(e.get("Id")): str(e.get("Target", "")) for e in rels.iter()}
    target = targets.get(rel_id)
    if not target:
        return None
    member = target.lstrip("/") if target.startswith("/") else posixpath.join("xl", target)
    return name, posixpath.normpath(member)


def sheet_extent(path: Path, sheet: str | int | None = None) -> Extent | None:
    """How far the cells of an XLSX sheet reach, from its cell references, reading the
    sheet's XML as it streams (1 MiB at a time); None when the sheet cannot be found
    (the reader then says why) or the file is not an XLSX."""
    if path.suffix.lower() not in (".xlsx", ".xlsm"):
        return None
    try:
        with zipfile.ZipFile(path) as archive:
            part = _sheet_part(archive, sheet)
            if part is None:
                return None
            name, member = part
            columns = rows = cells = 0
            with archive.open(member) as fh:
                buf = b""
                while chunk := fh.read(_XML_CHUNK):
                    buf += chunk
                    end = buf.rfind(b">") + 1
                    head, buf = buf[:end], buf[end:]
                    if len(buf) > _XML_CHUNK:  # no tag is this long: text, keep the tail
                        buf = buf[-4096:]
                    head = head.translate(_SPACES)
                    letters = _REF_COLUMN.findall(head)
                    numbers = _REF_ROW.findall(head)
                    cells += len(numbers)
                    if letters and numbers:
                        columns = max(columns, _column_number(_largest(letters)))
                        rows = max(rows, int(_largest(numbers)))
    except (KeyError, zipfile.BadZipFile, OSError, EOFError, ValueError):
        return None  # a broken part: the reader names the problem
    return Extent(name, columns, rows, cells)


def read_workbook(
    path: Path,
    *,
    sheet: str | int | None = None,
    max_uncompressed: int = DEFAULT_MAX_UNCOMPRESSED,
    engine: ExcelEngine = "calamine",
    nrows: int | None = None,
    is_header: HeaderTest | None = None,
    limits: TableLimits = TableLimits(),
    scan: bool = True,
) -> Table:
    """Read one sheet of an XLSX/XLS/ODS workbook as text (first sheet by default).

    ``sheet`` is a sheet name or a 0-based position. ``scan=False`` skips the extent
    check (:func:`sheet_extent`) for a caller that made it already.
    """
    if path.suffix.lower() in _ZIP_SUFFIXES:
        check_zip_budget(path, max_uncompressed)
    if scan and (extent := sheet_extent(path, sheet)) is not None:
        extent.check(path, limits)
    wanted = limits.rows + 1 if nrows is None else min(nrows, limits.rows + 1)
    limit = wanted + HEADER_SEARCH_ROWS
    if engine == "openpyxl":
        name, rows = _rows_openpyxl(path, sheet, limit)
    else:
        name, rows = _rows_calamine(path, sheet, limit)
    where = f"{path}, sheet {name!r}"  # what errors name from here on
    if not rows:
        raise SpreadsheetError(f"{path}: sheet {name!r} is empty (no header row)")
    top = [[cell_text(v) for v in r] for r in rows[:HEADER_SEARCH_ROWS]]
    skip = header_index(top, is_header)
    width = max(len(r) for r in rows)
    if width > limits.columns:
        raise limits.too_many_columns(where)
    if nrows is None and len(rows) - skip - 1 > limits.rows:
        raise limits.too_many_rows(where)
    header = top[skip] + [""] * (width - len(rows[skip]))
    columns = _unique_headers(header)
    stop = None if nrows is None else skip + 1 + nrows
    body = rows[skip + 1 : stop]
    del rows
    if any(len(r) != width for r in body):  # calamine's rows are already all as wide
        body = [r if len(r) == width else [*r, *([None] * (width - len(r)))] for r in body]
    data: dict[str, list[str]] = {}
    for j, col in enumerate(columns):  # one column at a time: 4x faster than zip(*body)
        values = [r[j] for r in body]
        data[col] = [v if type(v) is str else cell_text(v) for v in values]
    del body
    frame = pd.DataFrame(data, dtype=str, columns=columns)
    frame = _finish(where, frame, first_row=skip + 2, limits=limits)
    return Table(path, frame, sheet=name, header_row=skip + 1)


def _unique_headers(header: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for i, raw in enumerate(header):
        name = raw.replace("\x00", "").strip() or f"column_{i + 1}"
        if name in seen:
            seen[name] += 1
            name = f"{name}.{seen[name]}"
        else:
            seen[name] = 0
        out.append(name)
    return out


def _finish(
    path: Path | str, frame: pd.DataFrame, first_row: int = 2, limits: TableLimits = TableLimits()
) -> pd.DataFrame:
    """Strip headers, number rows as the spreadsheet does (the first data row is
    ``first_row``), check cell sizes, remove NUL characters, drop all-empty rows."""
    if len(frame.columns) == 0:
        raise SpreadsheetError(f"{path}: no header row found")
    if len(frame.columns) > limits.columns:
        raise limits.too_many_columns(path)
    frame.columns = pd.Index(_unique_headers([str(c) for c in frame.columns]))
    frame.index = pd.RangeIndex(first_row, len(frame) + first_row)
    if len(frame):
        _clean_cells(path, frame, limits.cell_chars)
    if len(frame):
        non_empty = np.zeros(len(frame), dtype=bool)
        for i in range(len(frame.columns)):  # numpy compares object arrays ~4x faster
            non_empty |= frame.iloc[:, i].to_numpy(dtype=object) != ""
        if not bool(non_empty.all()):
            frame = frame[non_empty]
    return frame


def _clean_cells(path: Path | str, frame: pd.DataFrame, max_chars: int) -> None:
    """Refuse a cell longer than ``max_chars`` (naming its row and column); remove NULs."""
    for i, column in enumerate(frame.columns):
        values = frame.iloc[:, i].to_numpy(dtype=object)
        lengths = np.fromiter(map(len, values), dtype=np.int64, count=len(values))
        if int(lengths.max()) > max_chars:
            at = int(np.argmax(lengths > max_chars))
            raise SpreadsheetError(
                f"{path}: row {frame.index[at]}, column {column!r}: a cell of "
                f"{int(lengths[at]):,} characters, over the import limit of {max_chars:,}"
            )
        if "\x00" in "".join(values):
            frame.iloc[:, i] = frame.iloc[:, i].str.replace("\x00", "", regex=False)


def read_table(
    path: Path,
    *,
    sheet: str | int | None = None,
    encoding: str | None = None,
    delimiter: str | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_uncompressed: int = DEFAULT_MAX_UNCOMPRESSED,
    engine: ExcelEngine = "calamine",
    nrows: int | None = None,
    is_header: HeaderTest | None = None,
    limits: TableLimits = TableLimits(),
) -> Table:
    """Read a CSV or workbook file as text, after the size and zip-bomb checks.

    ``is_header`` lets a later row be the header row (module notes).
    """
    check_size(path, max_bytes)
    problem = unsupported_problem(path)
    if problem is not None:
        raise SpreadsheetError(f"{path}: {problem}")
    if is_excel(path):
        return read_workbook(
            path,
            sheet=sheet,
            max_uncompressed=max_uncompressed,
            engine=engine,
            nrows=nrows,
            is_header=is_header,
            limits=limits,
        )
    return read_csv(
        path,
        encoding=encoding,
        delimiter=delimiter,
        nrows=nrows,
        is_header=is_header,
        limits=limits,
    )


__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_UNCOMPRESSED",
    "HEADER_SEARCH_ROWS",
    "MAX_COMPRESSION_RATIO",
    "ExcelEngine",
    "Extent",
    "HeaderTest",
    "SpreadsheetError",
    "Table",
    "TableLimits",
    "cell_text",
    "check_header_width",
    "check_size",
    "check_zip_budget",
    "column_letters",
    "detect_encoding",
    "header_index",
    "is_excel",
    "mixed_lines",
    "read_csv",
    "read_table",
    "read_workbook",
    "sheet_extent",
    "sniff_delimiter",
]
