"""Contact imports: preview the detected mapping, upload to import in the background,
read progress, counts and rejected rows.

The upload is copied to a private temporary file (413 past ``import_max_bytes``), then
``campaigns.importer.import_file`` (the CLI's function) runs in a thread; its ``on_start``
callback hands back the job id. The job row in the ``imports`` table is the durable
status; progress while it runs is kept in memory. Imports are read through
``campaigns.import_runs.listing``, which first marks rows left ``running`` by a killed
process as failed.
"""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import tempfile
import threading
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Annotated, BinaryIO

from fastapi import (
    APIRouter,
    Depends,
    Form,
    HTTPException,
    Request,
    Response,
    UploadFile,
    status,
)
from pydantic import BaseModel, Field
from pydantic.dataclasses import dataclass as pydantic_dataclass

from campaigns import import_runs
from campaigns.deployment_defaults import import_region
from campaigns.importer import (
    ImportFailed,
    ImportOptions,
    MappingFailed,
    check_file,
    checked_options,
    import_file,
    preview_file,
    write_rejects_csv,
)
from gatecast.web.api.common import (
    Id,
    Limit,
    Offset,
    Page,
    download,
    field_error,
    not_found,
    upload,
)
from gatecast.web.context import AppContext, get_ctx
from gatecast.web.idempotency import IDEMPOTENT, run_once
from gatecast.web.problems import web_terms

router = APIRouter(tags=["imports"])
Ctx = Annotated[AppContext, Depends(get_ctx)]

#: multipart overhead tolerated on top of the file itself before refusing on Content-Length
MULTIPART_SLACK = 64 * 1024
_COPY_CHUNK = 1024 * 1024
#: how long POST /imports waits for the job row before answering
_START_WAIT_SECONDS = 30.0


@dataclass
class _Running:
    done: int = 0
    total: int = 0


_progress: dict[int, _Running] = {}
_progress_lock = threading.Lock()


@pydantic_dataclass(frozen=True)
class RejectPublic(import_runs.RejectedRow):
    """A rejected row: its spreadsheet row number, column, reason and cells as they were."""


class ImportPublic(BaseModel):
    """An import job: status (running, completed, failed), counts and progress."""

    id: int
    status: str
    filename: str
    list_id: int | None
    list_name: str | None
    phone_column: str | None
    name_column: str | None
    region: str
    rows_read: int
    imported: int
    updated: int
    unchanged: int = Field(
        0, description="Contacts in the file already stored exactly so (nothing changed)"
    )
    duplicates: int
    invalid: int
    skipped_opted_out: int
    error: str | None
    started_at: datetime
    finished_at: datetime | None
    progress_done: int | None = Field(None, description="Rows processed so far (while running)")
    progress_total: int | None = None
    rejects_total: int = 0
    rejects: list[RejectPublic] = Field(
        default_factory=list, description="The first rejected rows (all: /imports/{id}/rejects)"
    )


class RegionHintPublic(BaseModel):
    """The region most of the file's local numbers (no +) fit, when not the chosen one."""

    region: str = Field(description="ISO 3166 code to use, e.g. GB")
    name: str = Field(description="The region's English name")
    calling_code: int
    matched: int = Field(description="How many of the sampled local numbers it fits")
    sampled: int
    message: str = Field(description="What to tell the user")


class PreviewPublic(BaseModel):
    """The detected mapping and the first rows of a file; nothing is written."""

    filename: str
    columns: list[str]
    phone_column: str | None
    name_column: str | None
    attribute_columns: list[str]
    attribute_keys: dict[str, str]
    rows: list[dict[str, str]]
    phones: list[dict[str, str | None]]
    sheet: str | None
    encoding: str | None
    delimiter: str | None
    problem: str | None
    region: str = Field(description="The region the phones were read with")
    region_hint: RegionHintPublic | None = Field(
        None, description="A better region for the file's local numbers, if one fits most"
    )


def too_large_detail(limit: int) -> str:
    """What a 413 says: the import limit (no request body may exceed it, plus the slack)."""
    return (
        f"the upload is larger than the import limit of {limit} bytes "
        "(the server's GATECAST_IMPORT_MAX_BYTES)"
    )


def _too_large(limit: int) -> HTTPException:
    return HTTPException(status.HTTP_413_CONTENT_TOO_LARGE, detail=too_large_detail(limit))


def _check_declared_size(request: Request, limit: int) -> None:
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit + MULTIPART_SLACK:
        raise _too_large(limit)


@dataclass(frozen=True)
class SavedUpload:
    """An upload copied to a private temporary folder under its original file name."""

    path: Path
    sha256: str

    @property
    def name(self) -> str:
        """The file's original name (what the user chose; errors name the file by it)."""
        return self.path.name

    def discard(self) -> None:
        """Delete the temporary copy."""
        shutil.rmtree(self.path.parent, ignore_errors=True)


def save_upload(upload: UploadFile, limit: int) -> SavedUpload:
    """Copy an upload into a private temporary directory; 413 past ``limit`` bytes."""
    name = Path(upload.filename or "upload").name or "upload"
    folder = Path(tempfile.mkdtemp(prefix="gatecast-upload-"))
    target = folder / name
    written = 0
    digest = hashlib.sha256()
    source: BinaryIO = upload.file
    try:
        with target.open("wb") as out:
            while chunk := source.read(_COPY_CHUNK):
                written += len(chunk)
                if written > limit:
                    raise _too_large(limit)
                digest.update(chunk)
                out.write(chunk)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return SavedUpload(target, digest.hexdigest())


def _options(
    ctx: AppContext,
    list_name: str,
    phone_column: str | None,
    name_column: str | None,
    region: str | None,
    sheet: str | None,
    tags: str | None = None,
    opt_out: bool = False,
    attributes: str | None = None,
) -> ImportOptions:
    sheet_value: str | int | None = sheet or None
    if sheet and sheet.isdigit():
        sheet_value = int(sheet)
    return ImportOptions(
        list_name=list_name,
        opt_out=opt_out,
        phone_column=phone_column or None,
        name_column=name_column or None,
        region=import_region(ctx.engine, region, ctx.settings.default_region),
        sheet=sheet_value,
        tags=tuple(t for t in (tags or "").split(",") if t.strip()),
        attributes=_attribute_map(attributes),
        max_bytes=ctx.settings.import_max_bytes,
        xlsx_max_uncompressed_bytes=ctx.settings.xlsx_max_uncompressed_bytes,
        max_columns=ctx.settings.import_max_columns,
        max_rows=ctx.settings.import_max_rows,
        max_cell_chars=ctx.settings.import_max_cell_chars,
        parse_limits=ctx.settings.parse_limits(),
    )


ATTRIBUTES_HELP = (
    'A JSON object from column header to attribute name, e.g. {"City": "city", '
    '"Notes": null}: null or "" leaves the column out; columns not named keep their '
    "default attribute (the header in lowercase, non-letters as _)"
)


def _attribute_map(text: str | None) -> tuple[tuple[str, str], ...]:
    """The ``attributes`` form field as ``(column, key)`` pairs (422 on the field)."""
    if not text or not text.strip():
        return ()
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and (v is None or isinstance(v, str)) for k, v in value.items()
    ):
        raise field_error(
            ("body", "attributes"),
            'write a JSON object of column to attribute name, e.g. {"City": "city"} '
            "(null leaves a column out)",
        )
    return tuple((k, v or "") for k, v in value.items())


def _rejects(page: import_runs.RejectPage) -> list[RejectPublic]:
    return [RejectPublic(**asdict(r)) for r in page.items]


def load_import(ctx: AppContext, import_id: int, rejects: int = 100) -> ImportPublic:
    """One import job with its first ``rejects`` rejected rows, or a 404."""
    found = import_runs.listing(ctx.engine, now=ctx.clock(), import_id=import_id, rejects=rejects)
    if not found:
        raise not_found("import", import_id)
    return _public(found[0])


def _public(listed: import_runs.ListedRun) -> ImportPublic:
    run = listed.run
    with _progress_lock:
        running = _progress.get(run.id) if run.status == "running" else None
    return ImportPublic.model_validate(
        {
            **asdict(run),
            # written by the domain: may name a server path or a CLI option
            "error": web_terms(run.error) if run.error else run.error,
            "unchanged": run.unchanged,
            "progress_done": running.done if running else None,
            "progress_total": running.total if running else None,
            "rejects_total": listed.rejects.total,
            "rejects": _rejects(listed.rejects),
        }
    )


def start_import(ctx: AppContext, path: Path, opts: ImportOptions, original_filename: str) -> int:
    """Run ``import_file`` in a thread; the job id as soon as its row exists.

    An import refused before its job row exists (e.g. an empty list name) raises
    :class:`ImportFailed` here.
    """
    started = ctx.clock()
    outcome: dict[str, BaseException] = {}
    learnt: dict[str, int] = {}
    ready = threading.Event()
    state = _Running()

    def progress(done: int, total: int) -> None:
        state.done, state.total = done, total

    def on_start(job_id: int) -> None:
        learnt["id"] = job_id
        with _progress_lock:
            _progress[job_id] = state
        ready.set()

    def run() -> None:
        try:
            import_file(
                ctx.engine,
                path,
                opts,
                progress=progress,
                original_filename=original_filename,
                now=started,
                on_start=on_start,
            )
        except BaseException as exc:  # reported through the job row or to the caller
            outcome["error"] = exc
        finally:
            shutil.rmtree(path.parent, ignore_errors=True)
            job = learnt.get("id")
            if job is not None:
                with _progress_lock:
                    _progress.pop(job, None)
            ready.set()

    thread = threading.Thread(target=run, name="gatecast-import", daemon=True)
    thread.start()
    if not ready.wait(_START_WAIT_SECONDS):
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, "the import did not start")
    job_id = learnt.get("id")
    if job_id is not None:
        return job_id
    error = outcome.get("error")
    if isinstance(error, ImportFailed):
        raise error
    raise RuntimeError(f"the import stopped before it started: {error!r}")


@router.post("/imports/preview", response_model=PreviewPublic)
def post_preview(
    request: Request,
    ctx: Ctx,
    file: Annotated[UploadFile, upload("CSV, XLSX, XLS, ODS or vCard (.vcf)")],
    phone_column: Annotated[str | None, Form()] = None,
    name_column: Annotated[str | None, Form()] = None,
    region: Annotated[str | None, Form()] = None,
    sheet: Annotated[str | None, Form()] = None,
    attributes: Annotated[str | None, Form(description=ATTRIBUTES_HELP)] = None,
) -> PreviewPublic:
    """The detected phone/name columns and the first rows, before importing.

    ``region_hint`` suggests another region when most local numbers (no +) of the
    file's first 200 rows are invalid in ``region`` but valid local numbers of one
    other country ("Most numbers look like United Kingdom (+44) local numbers: use
    GB?").
    """
    limit = ctx.settings.import_max_bytes
    _check_declared_size(request, limit)
    saved = save_upload(file, limit)
    try:
        opts = _options(
            ctx, "preview", phone_column, name_column, region, sheet, attributes=attributes
        )
        try:
            opts = checked_options(opts)
        except ImportFailed as exc:
            raise field_error(("body", "region"), str(exc)) from None
        try:
            preview = preview_file(saved.path, opts, rows=5)
        except MappingFailed as exc:
            raise field_error(("body", "attributes"), web_terms(str(exc))) from None
        except ImportFailed as exc:
            raise field_error(("body", "file"), web_terms(str(exc))) from None
        data = preview.to_dict()
        if data.get("problem"):
            data["problem"] = web_terms(str(data["problem"]))
        return PreviewPublic.model_validate(data)
    finally:
        saved.discard()


@router.post("/imports", response_model=ImportPublic, status_code=202, dependencies=[IDEMPOTENT])
def post_import(
    request: Request,
    ctx: Ctx,
    file: Annotated[UploadFile, upload("CSV, XLSX, XLS, ODS or vCard (.vcf)")],
    list_name: Annotated[
        str | None, Form(description="The list to import into (created if new)")
    ] = None,
    phone_column: Annotated[str | None, Form()] = None,
    name_column: Annotated[str | None, Form()] = None,
    region: Annotated[str | None, Form(description="Region for numbers without +")] = None,
    sheet: Annotated[str | None, Form(description="Sheet name or 0-based index")] = None,
    tags: Annotated[
        str | None, Form(description="Tags for every imported contact, comma-separated")
    ] = None,
    opt_out: Annotated[
        bool,
        Form(
            description="Opt every number of the file out instead of importing into a list "
            "(unknown numbers become opted-out contacts; give no list_name)"
        ),
    ] = False,
    attributes: Annotated[str | None, Form(description=ATTRIBUTES_HELP)] = None,
) -> Response:
    """Start importing a spreadsheet or vCard file in the background; poll GET /imports/{id}.

    With ``opt_out`` (and no ``list_name``) every valid number of the file is opted out
    instead: ``imported`` counts new contacts created opted out, ``updated`` existing
    contacts opted out now, ``unchanged`` those already opted out; the job's ``list_id``
    is null. A vCard file's ``row_number`` in the rejects is the card's number.

    A ``tags`` column in the file tags each row's contact (comma-separated); a
    ``timezone`` column must hold IANA zones (rows with another value are rejected).
    Every other column becomes a contact attribute, named by ``attributes`` or after
    its header; a name or attribute cell of ``NA``, ``N/A``, ``null``, ``-`` (and the
    like) is read as empty.

    A file whose first rows already show it cannot import (not a spreadsheet, not
    decodable, empty, over a column or cell limit, no phone column) answers 422 naming
    the file and the problem, and no job starts.

    With an ``Idempotency-Key`` header, a repeat of the same upload (same file and
    fields) answers the first answer again instead of importing twice.
    """
    limit = ctx.settings.import_max_bytes
    _check_declared_size(request, limit)
    if opt_out and list_name:
        raise field_error(("body", "list_name"), "an opt-out file goes into no list: leave it out")
    if not opt_out and not (list_name or "").strip():
        raise field_error(("body", "list_name"), "a list name cannot be empty")
    saved = save_upload(file, limit)
    fields = {
        "file": saved.name,
        "sha256": saved.sha256,
        "list_name": list_name,
        "phone_column": phone_column,
        "name_column": name_column,
        "region": region,
        "sheet": sheet,
        "tags": tags,
        "opt_out": opt_out,
        "attributes": attributes,
    }
    started = False

    def create() -> ImportPublic:
        nonlocal started
        opts = _options(
            ctx, list_name or "", phone_column, name_column, region, sheet, tags, opt_out,
            attributes,
        )  # fmt: skip
        try:
            opts = checked_options(opts)
        except ImportFailed as exc:
            text = str(exc)
            if text.startswith("--tag: "):
                raise field_error(("body", "tags"), text.removeprefix("--tag: ")) from None
            raise field_error(("body", "region"), text) from None
        try:  # a file its first rows show unusable is refused now, not accepted then failed
            check_file(saved.path, opts)
        except MappingFailed as exc:
            raise field_error(("body", "attributes"), web_terms(str(exc))) from None
        except ImportFailed as exc:
            raise field_error(("body", "file"), web_terms(str(exc))) from None
        started = True  # start_import owns the copy from here (it deletes it when done)
        try:
            import_id = start_import(ctx, saved.path, opts, saved.name)
        except ImportFailed as exc:
            raise field_error(("body", "list_name"), web_terms(str(exc))) from None
        return load_import(ctx, import_id)

    try:
        return run_once(request, ctx, fields, create, status.HTTP_202_ACCEPTED)
    finally:
        if not started:  # replayed or refused: the copy was never used
            saved.discard()


@router.get("/imports", response_model=list[ImportPublic])
def get_imports(ctx: Ctx, limit: Limit = 50) -> list[ImportPublic]:
    """The latest imports, newest first (without their rejected rows).

    Imports left ``running`` by a process that died read ``failed`` (nothing is written).
    """
    return [
        _public(listed) for listed in import_runs.listing(ctx.engine, now=ctx.clock(), limit=limit)
    ]


@router.get("/imports/{import_id}", response_model=ImportPublic)
def get_import(import_id: Id, ctx: Ctx) -> ImportPublic:
    """An import's status, progress, counts and first 100 rejected rows."""
    return load_import(ctx, import_id)


@router.get("/imports/{import_id}/rejects", response_model=Page[RejectPublic])
def get_rejects(
    import_id: Id, ctx: Ctx, limit: Limit = 100, offset: Offset = 0
) -> Page[RejectPublic]:
    """Every rejected row of an import, paginated, by row number."""
    if import_runs.get_run(ctx.engine, import_id) is None:
        raise not_found("import", import_id)
    page = import_runs.rejects_page(ctx.engine, import_id, limit=limit, offset=offset)
    return Page[RejectPublic](items=_rejects(page), total=page.total, limit=limit, offset=offset)


#: rejected rows read per query while writing the CSV
_CSV_PAGE = 1000


@router.get(
    "/imports/{import_id}/rejects.csv",
    response_class=Response,
    responses=download("The rejected rows as CSV", "text/csv"),
)
def get_rejects_csv(import_id: Id, ctx: Ctx) -> Response:
    """Every rejected row of an import as a CSV file to fix and import again.

    Columns: ``row_number`` (the row in the file; the card for a vCard file),
    ``column`` (the column at fault), ``reason``, then the row's cells as they were, as
    the CLI's ``--rejects`` file writes them. The original columns come in the file's
    order on SQLite; PostgreSQL keeps a row's cells without their order, so they come
    in its order there.
    """
    run = import_runs.get_run(ctx.engine, import_id)
    if run is None:
        raise not_found("import", import_id)
    out = io.StringIO()
    columns: list[str] = []
    offset = 0
    while True:
        page = import_runs.rejects_page(ctx.engine, import_id, limit=_CSV_PAGE, offset=offset)
        if offset == 0:
            columns = list(dict.fromkeys(k for r in page.items for k in r.raw))
        write_rejects_csv(out, columns, page.items, header=offset == 0)
        offset += len(page.items)
        if not page.items or offset >= page.total:
            break
    stem = Path(run.filename).stem or "import"
    safe = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in stem)[:80]
    return Response(
        out.getvalue(),
        media_type="text/csv; charset=utf-8",
        headers={"Content-Disposition": f'attachment; filename="{safe}-rejected-rows.csv"'},
    )
