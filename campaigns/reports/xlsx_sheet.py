"""A worksheet streamed as XML into an XLSX package that openpyxl wrote without it.

openpyxl spends about 200 us per row on a cell object, its checks and an element each;
a report sheet is a million rows of text, so this module writes that one sheet itself.
:func:`replace_sheet` copies every part of a small workbook that openpyxl saved (the
summary, its chart, styles, the empty placeholder sheet's relationships) into the final
package, and streams the named sheet's part (found through ``xl/workbook.xml`` and its
rels) from :func:`sheet_xml` instead, compressed in a thread of its own (zlib releases
the GIL). Rows come two ways: values a row at a time (:class:`Layout`,
:func:`render_rows`: a ``%`` template when no value needs care), or many rows the
database joined into one blob with marker characters (:meth:`Marked.expand`: a few
``bytes.replace`` over the blob, no Python step per row).

Cells: text as inline strings (``t="inlineStr"``, ``xml:space="preserve"`` when it
starts or ends with white space, and on every text cell of a blob), ``& < >`` escaped,
CR as ``&#13;`` (so it survives a reader's end-of-line normalisation); the empty string
as an empty inline cell, which readers see as no value (what openpyxl writes for
``""``); numbers as numbers; dates as numbers (Excel serials) with a date-format style
index. Characters that XML 1.0 forbids (C0 controls other than
tab, LF and CR; lone surrogates; U+FFFE, U+FFFF) are dropped: openpyxl would raise
``IllegalCharacterError`` and fail the whole report on one reply text.
"""

from __future__ import annotations

import contextlib
import queue
import re
import threading
import zipfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from operator import itemgetter
from pathlib import Path, PurePosixPath
from typing import IO, Literal
from xml.etree import ElementTree

#: a column of the sheet: text, a number, or cells rendered as XML by the database
Kind = Literal["text", "number", "cells"]

_MAIN = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
_REL = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
_PKG_REL = "http://schemas.openxmlformats.org/package/2006/relationships"

#: deflate level of the streamed sheet. Measured on 123 MB of report XML (200k rows):
#: level 1 0.53 s to 7.5 MB, 3 0.43 s to 5.4 MB, 6 0.98 s to 4.5 MB, 9 slower still;
#: the other parts keep zlib's default
COMPRESSLEVEL = 3
#: rendered pieces waiting for the compressing thread (memory stays flat)
_AHEAD = 4

#: characters XML 1.0 forbids, dropped from cell text
ILLEGAL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
#: text needing more than the template: markup, CR, forbidden characters; a separator
#: ``\x00`` joins a row's cells for the check
_SPECIAL = re.compile("[&<>\r\x01-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_SEP = "\x00"
_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", "\r": "&#13;"})

_TEXT = '<c t="inlineStr"><is><t>%s</t></is></c>'
_EMPTY_TEXT = '<c t="inlineStr"><is><t></t></is></c>'
_EMPTY = '<c t="inlineStr"/>'
_NUMBER = "<c><v>%s</v></c>"
_WS = frozenset(" \t\n")
#: a ``<t>`` whose text starts or ends with white space (CR is written ``&#13;``)
_NEEDS_PRESERVE = re.compile(r"<t>(?=[ \t\n]|&#13;|[^<]*(?:[ \t\n]|&#13;)</t>)")
_PRESERVE = '<t xml:space="preserve">'
_OPEN_PRESERVE = b'<c t="inlineStr"><is><t xml:space="preserve">'
_CLOSE = b"</t></is></c>"
#: bytes a marked blob must not hold: C0 controls XML forbids, except the markers
#: (\x18, \x19, \x1b-\x1f, counted instead), and the marker of an empty cell
_FORBIDDEN_BYTES = bytes([*range(0x09), 0x0B, 0x0C, *range(0x0E, 0x18), 0x1A])
_EMPTY_MARK = b"\x1a"
_BYTE_ESCAPES = ((b"&", b"&amp;"), (b"<", b"&lt;"), (b">", b"&gt;"), (b"\r", b"&#13;"))

_HEAD = (
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
    f'<worksheet xmlns="{_MAIN}"><sheetViews><sheetView workbookViewId="0">'
    '<pane ySplit="1" topLeftCell="A2" activePane="bottomLeft" state="frozen"/>'
    '<selection pane="bottomLeft" activeCell="A2" sqref="A2"/>'
    '</sheetView></sheetViews><sheetFormatPr defaultRowHeight="15"/><sheetData>'
)
_TAIL = "</sheetData></worksheet>"


def clean(text: str) -> str:
    """``text`` as cell content: forbidden characters dropped, markup and CR escaped."""
    return ILLEGAL.sub("", text).translate(_ESCAPES)


@dataclass(frozen=True)
class Layout:
    """How fetched rows become ``<row>`` elements. ``kinds``: a row's fields in sheet
    order, where a "cells" field is XML cells the database rendered (one or more
    columns), written as they are. A fetched row holds the text and number fields in
    that order, then, last, the "cells" fields."""

    kinds: tuple[Kind, ...]

    @property
    def values(self) -> int:
        """Leading fields of a fetched row that are text or numbers (to be escaped)."""
        return sum(kind != "cells" for kind in self.kinds)

    @property
    def template(self) -> str:
        """The ``%`` template of a row: its number, then its cells in sheet order."""
        cells = {"text": _TEXT, "number": _NUMBER, "cells": "%s"}
        return '<row r="%d">' + "".join(cells[k] for k in self.kinds) + "</row>"

    @property
    def order(self) -> Callable[[Sequence[str]], tuple[str, ...]]:
        """A fetched row's fields in sheet order."""
        fetched = [i for i, k in enumerate(self.kinds) if k != "cells"]
        fetched += [i for i, k in enumerate(self.kinds) if k == "cells"]
        getter = itemgetter(*[fetched.index(i) for i in range(len(self.kinds))])
        return getter if len(self.kinds) > 1 else (lambda row: (row[0],))


def _plain(joined: str, seps: int) -> bool:
    """Values joined by ``_SEP`` need no escaping, dropping or ``xml:space``."""
    return (
        _SPECIAL.search(joined) is None
        and joined.count(_SEP) == seps  # no NUL of their own
        and joined[:1] not in _WS
        and joined[-1:] not in _WS
        and " \x00" not in joined
        and "\x00 " not in joined
        and "\t\x00" not in joined
        and "\x00\t" not in joined
        and "\n\x00" not in joined
        and "\x00\n" not in joined
    )


def render_rows(layout: Layout, rows: Iterable[Sequence[str]], first: int) -> str:
    """The ``<row>`` elements of ``rows`` numbered from ``first``: a row whose values
    need nothing is one ``%``, others are cleaned value by value and get ``xml:space``
    where their text has white-space edges. Empty cells are fixed over the chunk."""
    template, order, n = layout.template, layout.order, layout.values
    out: list[str] = []
    append = out.append
    r = first
    for row in rows:
        if _plain(_SEP.join(row[:n]), n - 1):
            append(template % (r, *order(row)))
        else:
            values = [clean(v) for v in row[:n]]
            values += row[n:]
            append(_NEEDS_PRESERVE.sub(_PRESERVE, template % (r, *order(values))))
        r += 1
    return "".join(out).replace(_EMPTY_TEXT, _EMPTY)


@dataclass(frozen=True)
class Marked:
    """Rows the database rendered as one UTF-8 blob: each text value between
    ``text_start`` and ``text_end``, each number between ``number_start`` and
    ``number_end``, each date (an Excel serial number, or nothing for no date) between
    ``date_start`` and ``date_end``, rows joined by ``row_sep``; ``texts``, ``numbers``
    and ``dates`` a row. Dates get the cell style ``date_style`` (the workbook's date
    format). The markers are control characters XML forbids, so a value holding one is
    found by counting them (and the blob left to the careful path)."""

    texts: int
    numbers: int
    text_start: bytes
    text_end: bytes
    number_start: bytes
    number_end: bytes
    row_sep: bytes
    dates: int = 0
    date_start: bytes = b"\x19"
    date_end: bytes = b"\x18"
    date_style: int = 0

    def expand(self, blob: bytes, rows: int) -> bytes | None:
        """The ``<row>`` elements (without ``r``: the rows follow each other) of ``blob``
        holding ``rows`` rows, or None when a value holds a character XML forbids (or
        the blob is not UTF-8). Every text cell has ``xml:space="preserve"``: no look at
        each value's edges; ``& < >`` and CR are escaped over the whole blob."""
        if not blob.isascii():
            try:
                blob.decode()
            except UnicodeDecodeError:
                return None
            if b"\xef\xbf\xbe" in blob or b"\xef\xbf\xbf" in blob:  # U+FFFE, U+FFFF
                return None
        if len(blob.translate(None, _FORBIDDEN_BYTES)) != len(blob):
            return None
        for marker, per_row in (
            (self.text_start, self.texts),
            (self.text_end, self.texts),
            (self.number_start, self.numbers),
            (self.number_end, self.numbers),
            (self.date_start, self.dates),
            (self.date_end, self.dates),
        ):
            if blob.count(marker) != per_row * rows:
                return None
        if blob.count(self.row_sep) != rows - 1:
            return None
        for char, entity in _BYTE_ESCAPES:
            if char in blob:
                blob = blob.replace(char, entity)
        blob = blob.replace(self.text_start + self.text_end, _EMPTY_MARK)
        blob = blob.replace(self.date_start + self.date_end, _EMPTY_MARK)
        for marker, markup in (
            (self.text_start, _OPEN_PRESERVE),
            (self.text_end, _CLOSE),
            (self.number_start, b"<c><v>"),
            (self.number_end, b"</v></c>"),
            (self.date_start, b'<c s="%d"><v>' % self.date_style),
            (self.date_end, b"</v></c>"),
            (_EMPTY_MARK, _EMPTY.encode()),
            (self.row_sep, b"</row><row>"),
        ):
            blob = blob.replace(marker, markup)
        return b"<row>" + blob + b"</row>"


def sheet_xml(header: Sequence[str], body: Iterable[str | bytes]) -> Iterator[bytes]:
    """The worksheet XML in UTF-8 pieces: the header row (text), then ``body``'s rows."""
    text: Kind = "text"
    yield (_HEAD + render_rows(Layout((text,) * len(header)), [header], 1)).encode()
    for xml in body:
        yield xml if isinstance(xml, bytes) else xml.encode()
    yield _TAIL.encode()


def sheet_part(package: zipfile.ZipFile, sheet: str) -> str:
    """The zip name of the worksheet part named ``sheet``, through the workbook's rels."""
    # parts openpyxl wrote a moment ago, not untrusted input
    workbook = ElementTree.fromstring(package.read("xl/workbook.xml"))  # noqa: S314
    rels = ElementTree.fromstring(package.read("xl/_rels/workbook.xml.rels"))  # noqa: S314
    for node in workbook.iter(f"{{{_MAIN}}}sheet"):
        if node.get("name") == sheet:
            rid = node.get(f"{{{_REL}}}id")
            break
    else:
        raise KeyError(f"no sheet {sheet!r} in the workbook")
    for rel in rels.iter(f"{{{_PKG_REL}}}Relationship"):
        if rel.get("Id") == rid:
            target = rel.get("Target", "")
            if target.startswith("/"):
                return target[1:]
            return str(PurePosixPath("xl") / target)  # relative to the workbook part
    raise KeyError(f"no relationship {rid!r} for sheet {sheet!r}")


def _write_behind(pieces: Iterable[bytes], write: Callable[[bytes], object]) -> None:
    """``write`` every piece in a thread while this one makes the next: the zip's CRC
    and deflate release the GIL, so rendering and compression use two cores."""
    ahead: queue.Queue[bytes | None] = queue.Queue(_AHEAD)
    failed: list[BaseException] = []

    def writer() -> None:
        try:
            while (piece := ahead.get()) is not None:
                write(piece)
        except BaseException as exc:  # handed to the producer, which raises it
            failed.append(exc)
            with contextlib.suppress(queue.Empty):  # unblock a waiting put
                while True:
                    ahead.get_nowait()

    thread = threading.Thread(target=writer, name="xlsx-write", daemon=True)
    thread.start()
    try:
        for piece in pieces:
            while not failed:
                with contextlib.suppress(queue.Full):
                    ahead.put(piece, timeout=0.05)
                    break
            if failed:
                raise failed[0]
    finally:
        while thread.is_alive():
            with contextlib.suppress(queue.Full):
                ahead.put(None, timeout=0.05)
        thread.join()
    if failed:
        raise failed[0]


def replace_sheet(package: IO[bytes], sheet: str, pieces: Iterable[bytes], target: Path) -> None:
    """Write ``target``: the zip ``package`` with the part of worksheet ``sheet`` replaced
    by ``pieces`` (streamed, deflated at :data:`COMPRESSLEVEL`, ZIP64-ready)."""
    with (
        zipfile.ZipFile(package) as src,
        zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED, compresslevel=COMPRESSLEVEL) as out,
    ):
        part = sheet_part(src, sheet)
        for info in src.infolist():
            if info.filename != part:
                out.writestr(info, src.read(info))
                continue
            with out.open(part, "w", force_zip64=True) as fh:  # a name: COMPRESSLEVEL
                _write_behind(pieces, fh.write)


__all__ = [
    "COMPRESSLEVEL",
    "ILLEGAL",
    "Layout",
    "Marked",
    "clean",
    "render_rows",
    "replace_sheet",
    "sheet_part",
    "sheet_xml",
]
