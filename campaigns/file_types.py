"""The kinds of contact file gatecast reads, by suffix (the one list every message about a
file's type names), and what a file that is not text holds, told by its first bytes."""

from __future__ import annotations

from pathlib import Path

#: text read as CSV (a file without a suffix too)
TEXT_SUFFIXES = (".csv", ".tsv", ".txt")
#: workbooks that are zip archives
ZIP_WORKBOOK_SUFFIXES = (".xlsx", ".xlsm", ".xlsb", ".ods")
#: every workbook (read in a child process: ``campaigns.untrusted_files``)
WORKBOOK_SUFFIXES = (*ZIP_WORKBOOK_SUFFIXES, ".xls")
#: a phone's contacts export (``campaigns.vcards``)
VCARD_SUFFIXES = (".vcf", ".vcard")
#: every suffix an import reads
SUPPORTED_SUFFIXES = (*TEXT_SUFFIXES, *WORKBOOK_SUFFIXES, *VCARD_SUFFIXES)

#: the first bytes of common files that are not text, and what to call them
_SIGNATURES: tuple[tuple[bytes, str], ...] = (
    (b"%PDF", "a PDF document"),
    (b"PK\x03\x04", "a zip archive (an Excel, OpenDocument or other zipped file)"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "an old Office file (such as an .xls workbook)"),
    (b"\x89PNG", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF8", "a GIF image"),
    (b"\x1f\x8b", "a gzip archive"),
    (b"{\\rtf", "an RTF document"),
)
#: the share of a text's first characters that may be control characters before it is
#: taken for binary data (a few NULs in a real CSV are removed, not refused)
_BINARY_SHARE = 0.1
_TEXT_CONTROLS = frozenset("\t\n\r\f\v")


def _is_control(c: str) -> bool:
    """A character text files do not hold: C0 and C1 controls (but tabs and line ends)
    and the replacement character of bytes that did not decode."""
    code = ord(c)
    return code == 0xFFFD or (code < 32 and c not in _TEXT_CONTROLS) or 0x7F <= code <= 0x9F


def supported_text() -> str:
    """The suffixes an import reads, for a message: ".csv, .tsv, ..., .vcard"."""
    return ", ".join(SUPPORTED_SUFFIXES)


def unsupported_problem(path: Path) -> str | None:
    """Why ``path`` is not read by its suffix, or None when it is (no suffix: CSV)."""
    suffix = path.suffix.lower()
    if suffix == "" or suffix in SUPPORTED_SUFFIXES:
        return None
    return f"unsupported file type {suffix!r} (use one of {supported_text()})"


def not_text(head: bytes, decoded: str) -> str | None:
    """What a file meant to be text holds instead ("a PDF document", "binary data"), from
    its first bytes ``head`` and their decoded text; None when it looks like text."""
    for magic, kind in _SIGNATURES:
        if head.startswith(magic):
            return kind
    if not decoded:
        return None
    controls = sum(1 for c in decoded if _is_control(c))
    return "binary data, not text" if controls > _BINARY_SHARE * len(decoded) else None


__all__ = [
    "SUPPORTED_SUFFIXES",
    "TEXT_SUFFIXES",
    "VCARD_SUFFIXES",
    "WORKBOOK_SUFFIXES",
    "ZIP_WORKBOOK_SUFFIXES",
    "not_text",
    "supported_text",
    "unsupported_problem",
]
