"""Hostile spreadsheets, written by hand (a few KB on disk each), with the reason each
one is refused for. Shared by the unit tests of :mod:`campaigns.untrusted_files` and the
hostile-upload journey.

- the far cell: A1 and XFD1048576 (a reader would allocate 512 GB), and the same with
  the far cell in column T (1 GB);
- a zip bomb: an XLSX whose sheet XML expands to gigabytes (built from one deflate
  block repeated, so writing it costs no compression of gigabytes);
- a huge header (5,000 columns) and a huge cell (100,000 characters);
- a file that is not a spreadsheet at all, named ``.xlsx``;
- the far cell in an ODS (empty rows and cells as repeats: nothing to scan, the child's
  memory limit stops it).
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

_MAIN = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
_REL = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
_PKG = "http://schemas.openxmlformats.org/package/2006/relationships"
_CT = (
    '<?xml version="1.0" encoding="UTF-8"?>'
    '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
    '<Default Extension="rels" '
    'ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
    '<Default Extension="xml" ContentType="application/xml"/>'
    '<Override PartName="/xl/workbook.xml" ContentType="application/'
    'vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/>'
    '<Override PartName="/xl/worksheets/sheet1.xml" ContentType="application/'
    'vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/></Types>'
)
_RELS = (
    f'<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="{_PKG}">'
    f'<Relationship Id="rId1" Type="{_REL}/officeDocument" Target="xl/workbook.xml"/>'
    "</Relationships>"
)
_WORKBOOK = (
    f'<?xml version="1.0" encoding="UTF-8"?><workbook xmlns="{_MAIN}" xmlns:r="{_REL}">'
    '<sheets><sheet name="Sheet1" sheetId="1" r:id="rId1"/></sheets></workbook>'
)
_WORKBOOK_RELS = (
    f'<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="{_PKG}">'
    f'<Relationship Id="rId1" Type="{_REL}/worksheet" Target="worksheets/sheet1.xml"/>'
    "</Relationships>"
)
_SHEET_HEAD = f'<?xml version="1.0" encoding="UTF-8"?><worksheet xmlns="{_MAIN}"><sheetData>'
_SHEET_TAIL = "</sheetData></worksheet>"


@dataclass(frozen=True)
class Hostile:
    """A hostile file and the words its refusal must contain."""

    name: str
    reason: str


def _cell(ref: str, text: str) -> str:
    return f'<c r="{ref}" t="inlineStr"><is><t>{text}</t></is></c>'


def _column(number: int) -> str:
    out = ""
    while number:
        number, rest = divmod(number - 1, 26)
        out = chr(65 + rest) + out
    return out


@dataclass(frozen=True)
class _Member:
    name: str
    deflated: bytes
    crc: int
    size: int


def _member(name: str, text: str) -> _Member:
    data = text.encode()
    packer = zlib.compressobj(6, zlib.DEFLATED, -15)
    return _Member(name, packer.compress(data) + packer.flush(), zlib.crc32(data), len(data))


def _write_zip(path: Path, members: list[_Member]) -> None:
    """A zip file of deflated members, directory and all (sizes below 4 GiB)."""
    body = b""
    directory = b""
    for m in members:
        name = m.name.encode()
        offset = len(body)
        fields = (20, 0, 8, 0, 0, m.crc, len(m.deflated), m.size, len(name))
        body += struct.pack("<IHHHHHIIIHH", 0x04034B50, *fields, 0) + name + m.deflated
        directory += (
            struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, *fields, 0, 0, 0, 0, 0, offset) + name
        )
    end = struct.pack(
        "<IHHHHIIH", 0x06054B50, 0, 0, len(members), len(members), len(directory), len(body), 0
    )
    path.write_bytes(body + directory + end)


def xlsx(path: Path, sheet_xml: str | _Member) -> Path:
    """An XLSX of one sheet named Sheet1 with ``sheet_xml`` as its sheet part."""
    sheet = sheet_xml if isinstance(sheet_xml, _Member) else None
    members = [
        _member("[Content_Types].xml", _CT),
        _member("_rels/.rels", _RELS),
        _member("xl/workbook.xml", _WORKBOOK),
        _member("xl/_rels/workbook.xml.rels", _WORKBOOK_RELS),
        sheet or _member("xl/worksheets/sheet1.xml", str(sheet_xml)),
    ]
    _write_zip(path, members)
    return path


def far_cell(path: Path, far: str = "XFD1048576") -> Path:
    """A1 holds "phone", ``far`` holds a number: two cells, a huge sheet."""
    row = far.lstrip("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
    cells = f'<row r="1">{_cell("A1", "phone")}</row><row r="{row}">{_cell(far, "x")}</row>'
    return xlsx(path, _SHEET_HEAD + cells + _SHEET_TAIL)


def zip_bomb(path: Path, gigabytes: int = 2, declared: int | None = None) -> Path:
    """An XLSX whose sheet XML expands to ``gigabytes`` GB of blank space (its zip
    directory says so, as an honest zip does; ``declared``: says this size instead,
    its checksum left unchecked)."""
    chunk = b" " * (1 << 20)
    packer = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = packer.compress(chunk) + packer.flush(zlib.Z_FULL_FLUSH)  # stands alone
    count = gigabytes * 1024
    head, tail = (_SHEET_HEAD.encode(), _SHEET_TAIL.encode())
    first = zlib.compressobj(9, zlib.DEFLATED, -15)
    opening = first.compress(head) + first.flush(zlib.Z_FULL_FLUSH)
    last = zlib.compressobj(9, zlib.DEFLATED, -15)
    closing = last.compress(tail) + last.flush()
    crc = 0
    if declared is None:
        crc = zlib.crc32(head)
        for _ in range(count):
            crc = zlib.crc32(chunk, crc)
        crc = zlib.crc32(tail, crc)
    size = len(head) + count * len(chunk) + len(tail) if declared is None else declared
    sheet = _Member("xl/worksheets/sheet1.xml", opening + block * count + closing, crc, size)
    return xlsx(path, sheet)


def wide_header(path: Path, columns: int = 5_000) -> Path:
    """A header row of ``columns`` cells."""
    cells = "".join(_cell(f"{_column(i)}1", f"h{i}") for i in range(1, columns + 1))
    return xlsx(path, _SHEET_HEAD + f'<row r="1">{cells}</row>' + _SHEET_TAIL)


def huge_cell(path: Path, chars: int = 100_000) -> Path:
    """A phone header and one cell of ``chars`` characters under it."""
    rows = f'<row r="1">{_cell("A1", "phone")}</row><row r="2">{_cell("A2", "9" * chars)}</row>'
    return xlsx(path, _SHEET_HEAD + rows + _SHEET_TAIL)


def not_a_spreadsheet(path: Path) -> Path:
    """Plain text under an ``.xlsx`` name."""
    path.write_text("phone\n+4915112345678\n" * 100, encoding="utf-8")
    return path


def hostile_files(folder: Path) -> dict[Path, Hostile]:
    """Every hostile file, written into ``folder``, with what its refusal says."""
    folder.mkdir(parents=True, exist_ok=True)
    return {
        far_cell(folder / "far-cell.xlsx"): Hostile(
            "far-cell.xlsx",
            "far-cell.xlsx, sheet 'Sheet1': its cells reach column XFD, row 1048576: "
            "over the limit of",
        ),
        far_cell(folder / "far-column-t.xlsx", "T1048576"): Hostile(
            "far-column-t.xlsx",
            "far-column-t.xlsx, sheet 'Sheet1': its cells reach column T, row 1048576, "
            "but only 2 of those 20,971,520 cells hold anything",
        ),
        zip_bomb(folder / "zip-bomb.xlsx"): Hostile(
            "zip-bomb.xlsx", "refusing a possible zip bomb"
        ),
        wide_header(folder / "wide-header.xlsx"): Hostile(
            "wide-header.xlsx",
            "wide-header.xlsx, sheet 'Sheet1': its cells reach column GJH, row 1: "
            "over the limit of 1,000 columns",
        ),
        huge_cell(folder / "huge-cell.xlsx"): Hostile(
            "huge-cell.xlsx",
            "huge-cell.xlsx, sheet 'Sheet1': row 2, column 'phone': a cell of 100,000 "
            "characters, over the import limit",
        ),
        not_a_spreadsheet(folder / "not-a-workbook.xlsx"): Hostile(
            "not-a-workbook.xlsx", "not-a-workbook.xlsx: not a valid .xlsx file"
        ),
        far_cell_ods(folder / "far-cell.ods"): Hostile(
            "far-cell.ods", "far-cell.ods: reading it needs more memory than the limit of"
        ),
    }


def far_cell_ods(path: Path, columns: int = 20) -> Path:
    """An ODS whose last cell sits ``columns`` columns in, a million rows down (empty
    rows and cells written as repeats): no cell reference to scan, the reader's memory
    limit is what stops it."""
    table = "urn:oasis:names:tc:opendocument:xmlns:table:1.0"
    content = (
        '<?xml version="1.0" encoding="UTF-8"?><office:document-content '
        'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
        f'xmlns:table="{table}" '
        'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" office:version="1.2">'
        '<office:body><office:spreadsheet><table:table table:name="Sheet1">'
        '<table:table-row><table:table-cell office:value-type="string"><text:p>phone'
        "</text:p></table:table-cell></table:table-row>"
        '<table:table-row table:number-rows-repeated="1048574"><table:table-cell/>'
        "</table:table-row><table:table-row>"
        f'<table:table-cell table:number-columns-repeated="{columns - 1}"/>'
        '<table:table-cell office:value-type="string"><text:p>x</text:p></table:table-cell>'
        "</table:table-row></table:table></office:spreadsheet></office:body>"
        "</office:document-content>"
    )
    manifest = (
        '<?xml version="1.0" encoding="UTF-8"?><manifest:manifest xmlns:manifest='
        '"urn:oasis:names:tc:opendocument:xmlns:manifest:1.0"><manifest:file-entry '
        'manifest:full-path="/" manifest:media-type='
        '"application/vnd.oasis.opendocument.spreadsheet"/></manifest:manifest>'
    )
    _write_zip(
        path,
        [
            _member("mimetype", "application/vnd.oasis.opendocument.spreadsheet"),
            _member("META-INF/manifest.xml", manifest),
            _member("content.xml", content),
        ],
    )
    return path
