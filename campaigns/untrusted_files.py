"""Workbooks from outside are parsed apart: in a child process with a memory, time and
output limit, so a hostile file costs that child, never the process that received it.

Why: a workbook's reader allocates every cell between A1 and the farthest cell, so a
4.7 KB ``.xlsx`` with cells at A1 and XFD1048576 asks for 512 GB and aborts the process
it runs in. Uploads and CLI imports read workbooks (XLSX, XLSM, XLSB, XLS, ODS) through
:func:`read_apart`; CSV and vCard files stay in the calling process (their readers stream
and are bounded by the file size limit, and CSV keeps its speed).

How:
- Cheap checks first, in the caller: the file size, and for the zip formats the zip
  directory (total expanded size, compression ratio: zip bombs).
- The child is a fork of a single-threaded process: of the caller when it has no other
  thread (the CLI), else of a small server process that has the readers loaded
  (``multiprocessing``'s forkserver, started on first use: a threaded web server is
  never forked; a child then starts in about 20 ms). It lowers its own limits before
  it reads a byte:
  ``RLIMIT_AS`` (its address space may grow by :attr:`ParseLimits.memory_bytes`),
  ``RLIMIT_CPU``, ``RLIMIT_FSIZE`` (:attr:`ParseLimits.output_bytes`), no core file.
  It scans the sheet's cell references (:func:`campaigns.spreadsheets.sheet_extent`)
  and refuses a sheet reaching past the limits, then reads the sheet.
- It hands the table back as a CSV file of its cells with a JSON note of the columns
  and sheet (nothing pickled from the child), in a private temporary folder; the caller
  checks the files' size and reads them with the CSV reader it trusts with uploads.
- The caller waits at most :attr:`ParseLimits.seconds` and kills the child then. A child
  that dies (memory: an allocation refused, time, output) is a :class:`SpreadsheetError`
  naming the file, the sheet and the limit, in the user's terms.
"""

from __future__ import annotations

import csv
import errno
import faulthandler
import json
import multiprocessing
import os
import resource
import shutil
import signal
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from campaigns.file_types import WORKBOOK_SUFFIXES, ZIP_WORKBOOK_SUFFIXES

if TYPE_CHECKING:  # pandas is imported where a file is read, not with the settings
    from campaigns.spreadsheets import ExcelEngine, Extent, HeaderTest, Table, TableLimits

DEFAULT_PARSE_MEMORY = 1024 * 1024 * 1024
DEFAULT_PARSE_SECONDS = 60.0
DEFAULT_PARSE_OUTPUT = 512 * 1024 * 1024
_ZIP_SUFFIXES = ZIP_WORKBOOK_SUFFIXES
_WORKBOOK_SUFFIXES = WORKBOOK_SUFFIXES
#: as :data:`campaigns.spreadsheets.DEFAULT_MAX_UNCOMPRESSED`
_MAX_UNCOMPRESSED = 1024 * 1024 * 1024
_CELLS = "cells.csv"
_NOTE = "note.json"
_EXTENT = "extent.json"
#: how the child says a Python allocation failed (a native one aborts it: SIGABRT)
_EXIT_MEMORY = 75
#: how the child says a write went past its output limit (RLIMIT_FSIZE: EFBIG)
_EXIT_OUTPUT = 76
_start_lock = threading.Lock()
_context: Any = None


@dataclass(frozen=True)
class ParseLimits:
    """What one parse may use (settings ``GATECAST_IMPORT_PARSE_MEMORY_BYTES``,
    ``..._SECONDS``, ``..._OUTPUT_BYTES``)."""

    memory_bytes: int = DEFAULT_PARSE_MEMORY
    seconds: float = DEFAULT_PARSE_SECONDS
    output_bytes: int = DEFAULT_PARSE_OUTPUT


@dataclass(frozen=True)
class _Request:
    """What the child reads: sent to it pickled (parent to child only)."""

    path: Path
    sheet: str | int | None
    max_uncompressed: int
    engine: ExcelEngine
    nrows: int | None
    is_header: HeaderTest | None
    limits: TableLimits
    parse: ParseLimits
    folder: Path


def parsed_apart(path: Path) -> bool:
    """Whether :func:`read_apart` reads ``path`` in a child (workbooks, by suffix)."""
    return path.suffix.lower() in _WORKBOOK_SUFFIXES


def read_apart(
    path: Path,
    *,
    sheet: str | int | None = None,
    max_uncompressed: int = _MAX_UNCOMPRESSED,
    engine: ExcelEngine = "calamine",
    nrows: int | None = None,
    is_header: HeaderTest | None = None,
    limits: TableLimits | None = None,
    parse: ParseLimits = ParseLimits(),
) -> Table:
    """Read one sheet of a workbook as :func:`campaigns.spreadsheets.read_workbook` does,
    in a child process within ``parse`` (module notes). ``is_header`` must be picklable
    (a module-level function or object). Raises :class:`SpreadsheetError`."""
    from campaigns.spreadsheets import SpreadsheetError, TableLimits, check_zip_budget

    limits = limits or TableLimits()
    if path.suffix.lower() in _ZIP_SUFFIXES:
        check_zip_budget(path, max_uncompressed)
    folder = Path(tempfile.mkdtemp(prefix="gatecast-parse-"))
    try:
        request = _Request(
            path, sheet, max_uncompressed, engine, nrows, is_header, limits, parse, folder
        )
        child = _starter().Process(target=_child, args=(request,), daemon=True)
        child.start()
        child.join(parse.seconds)
        if child.exitcode is None:
            child.kill()
            child.join()
            raise SpreadsheetError(
                f"{_where(path, folder)}: reading it took longer than the limit of "
                f"{parse.seconds:g} seconds"
            )
        return _collect(path, folder, int(child.exitcode), parse)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _starter() -> Any:
    """How the child starts: a fork of a single-threaded caller (the CLI: nothing to
    start), else from the forkserver (a threaded server is never forked)."""
    if threading.active_count() == 1:
        return multiprocessing.get_context("fork")
    global _context
    with _start_lock:
        if _context is None:
            context = multiprocessing.get_context("forkserver")
            # the readers, the importer (its header test) and what the main script
            # imports: a child runs a script's main again (multiprocessing's rule, its
            # ``if __name__ == "__main__"`` guard), and finds those imported then
            preload = ["campaigns.importer", "campaigns.untrusted_files", "python_calamine"]
            context.set_forkserver_preload([*preload, *_main_imports()])
            _context = context
        return _context


def _main_imports() -> list[str]:
    """The modules a main script run by path took its names from (``gatecast``'s script:
    ``gatecast.cli``); none for ``python -m``, whose main a child does not run again."""
    main = sys.modules.get("__main__")
    if main is None or getattr(main, "__spec__", None) is not None:
        return []
    found = set()
    for key, value in vars(main).items():
        if key.startswith("__"):  # __loader__, __builtins__...
            continue
        name = (
            value.__name__ if isinstance(value, ModuleType) else getattr(value, "__module__", None)
        )
        if isinstance(name, str) and name not in ("__main__", "builtins"):
            found.add(name)
    return sorted(found)


def size_text(size: float) -> str:
    """A byte count as a user reads it: ``1 GiB``, ``512 MiB``, ``4.7 KiB``."""
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.3g} {unit}" if unit != "bytes" else f"{int(size)} bytes"
        size /= 1024
    return f"{size:.3g} GiB"  # pragma: no cover


def _where(path: Path, folder: Path) -> str:
    """``path, sheet 'S'`` when the child got as far as naming the sheet."""
    try:
        extent = json.loads((folder / _EXTENT).read_text(encoding="utf-8")[:4096])
        return f"{path}, sheet {str(extent['sheet'])!r}"
    except (OSError, ValueError, KeyError, TypeError):
        return str(path)


def _collect(path: Path, folder: Path, exitcode: int, parse: ParseLimits) -> Table:
    """The child's table (or its refusal) read back within the output limit."""
    from campaigns.spreadsheets import SpreadsheetError

    where = _where(path, folder)
    if exitcode in (_EXIT_MEMORY, -signal.SIGABRT, -signal.SIGSEGV, -signal.SIGBUS):
        raise SpreadsheetError(
            f"{where}: reading it needs more memory than the limit of "
            f"{size_text(parse.memory_bytes)} for one file"
        )
    if exitcode in (-signal.SIGXCPU, -signal.SIGKILL):
        raise SpreadsheetError(
            f"{where}: reading it took longer than the limit of {parse.seconds:g} seconds"
        )
    if exitcode in (_EXIT_OUTPUT, -signal.SIGXFSZ):
        raise SpreadsheetError(
            f"{where}: its cells hold more than the limit of "
            f"{size_text(parse.output_bytes)} of text for one file"
        )
    note_path, cells_path = folder / _NOTE, folder / _CELLS
    if exitcode != 0 or not note_path.is_file():
        raise SpreadsheetError(f"{where}: cannot read the workbook (its reader stopped)")
    size = note_path.stat().st_size + (cells_path.stat().st_size if cells_path.is_file() else 0)
    if size > parse.output_bytes:
        raise SpreadsheetError(
            f"{where}: its cells hold more than the limit of "
            f"{size_text(parse.output_bytes)} of text for one file"
        )
    note = json.loads(note_path.read_text(encoding="utf-8"))
    if "error" in note:
        raise SpreadsheetError(str(note["error"]))
    return _table(path, cells_path, note)


def _table(path: Path, cells_path: Path, note: dict[str, Any]) -> Table:
    """The table from the child's CSV and note (the CSV read as an upload's is)."""
    import numpy as np
    import pandas as pd

    from campaigns.spreadsheets import SpreadsheetError, Table

    columns = [str(c) for c in note["columns"]]
    rows = int(note["rows"])
    if rows:
        frame = pd.read_csv(
            cells_path,
            header=None,
            names=list(range(len(columns) + 1)),
            index_col=0,
            dtype=str,
            keep_default_na=False,
            na_filter=False,
            encoding="utf-8",
            engine="c",
        )
        if len(frame) != rows:
            raise SpreadsheetError(f"{path}: cannot read the workbook (its reader stopped)")
        frame.index = pd.Index(frame.index.astype(np.int64))
        frame.columns = pd.Index(columns)
    else:
        frame = pd.DataFrame({c: pd.Series([], dtype=object) for c in columns}, columns=columns)
    return Table(
        path,
        frame,
        sheet=None if note["sheet"] is None else str(note["sheet"]),
        header_row=int(note["header_row"]),
    )


# --- the child ------------------------------------------------------------------------


def _vm_size() -> int:
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def _lower_limits(parse: ParseLimits) -> None:
    """The child's own limits, set before it reads the file."""
    memory = _vm_size() + parse.memory_bytes
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    seconds = max(1, int(parse.seconds + 0.999))
    resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds + 5))
    resource.setrlimit(resource.RLIMIT_FSIZE, (parse.output_bytes, parse.output_bytes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _child(request: _Request) -> None:
    """Read the workbook and write its cells and note (runs in the child)."""
    from campaigns.spreadsheets import SpreadsheetError, read_workbook, sheet_extent

    faulthandler.disable()  # an abort at the memory limit is expected: no stack dump
    os.environ["RUST_BACKTRACE"] = "0"  # nor calamine's
    _lower_limits(request.parse)
    folder = request.folder
    try:
        try:
            extent: Extent | None = sheet_extent(request.path, request.sheet)
            if extent is not None:
                (folder / _EXTENT).write_text(json.dumps({"sheet": extent.sheet}), "utf-8")
                extent.check(request.path, request.limits)
            table = read_workbook(
                request.path,
                sheet=request.sheet,
                max_uncompressed=request.max_uncompressed,
                engine=request.engine,
                nrows=request.nrows,
                is_header=request.is_header,
                limits=request.limits,
                scan=False,
            )
        except SpreadsheetError as exc:
            (folder / _NOTE).write_text(json.dumps({"error": str(exc)}), "utf-8")
            return
        frame = table.frame
        with (folder / _CELLS).open("w", encoding="utf-8", newline="") as fh:
            columns = [frame.iloc[:, i].tolist() for i in range(len(frame.columns))]
            rows = zip(frame.index.tolist(), *columns, strict=True)
            csv.writer(fh).writerows(rows)  # a third faster than DataFrame.to_csv
        note = {
            "columns": table.columns,
            "rows": len(table.frame),
            "sheet": table.sheet,
            "header_row": table.header_row,
        }
        (folder / _NOTE).write_text(json.dumps(note), "utf-8")
    except MemoryError:
        os._exit(_EXIT_MEMORY)
    except OSError as exc:
        if exc.errno == errno.EFBIG:  # Python ignores SIGXFSZ: the write fails instead
            os._exit(_EXIT_OUTPUT)
        raise


__all__ = [
    "DEFAULT_PARSE_MEMORY",
    "DEFAULT_PARSE_OUTPUT",
    "DEFAULT_PARSE_SECONDS",
    "ParseLimits",
    "parsed_apart",
    "read_apart",
    "size_text",
]
