"""``gatecast media``: upload a media file for campaigns, list them, sign a fresh URL."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from gatecast.commands.common import fail, id_argument, open_engine_or_fail

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from campaigns.media import Media
    from gatecast.settings import Settings

console = Console()
media_app = typer.Typer(
    help="Media files for campaigns: upload one, get its signed URL for media_url.",
    no_args_is_help=True,
)
_DAYS = typer.Option(
    "--days",
    min=0.001,
    max=366,
    help="how many days the URL works (default GATECAST_MEDIA_URL_DAYS, 30)",
)


def _base(settings: Settings, engine: Engine) -> str | None:
    """Where URLs point: GATECAST_PUBLIC_URL, else the running ``gatecast serve``."""
    from gatecast.runtime.foreground import running_serve_address

    return settings.public_url.strip() or running_serve_address(settings, engine)


def _described(
    engine: Engine, settings: Settings, item: Media, days: float | None
) -> dict[str, Any]:
    from campaigns.media import signed_url
    from storage.types import utcnow

    out: dict[str, Any] = {
        "id": item.id,
        "name": item.name,
        "kind": item.kind,
        "content_type": item.content_type,
        "size": item.size,
        "sha256": item.sha256,
        "url": None,
        "url_expires_at": None,
    }
    base = _base(settings, engine)
    if base:
        url, expires = signed_url(
            engine, item, base, now=utcnow(), days=days or settings.media_url_days
        )
        out["url"], out["url_expires_at"] = url, expires.isoformat()
    return out


def _print(out: dict[str, Any], as_json: bool) -> None:
    """A stored file and its link, as words (or JSON)."""
    from campaigns.untrusted_files import size_text

    if as_json:
        print(json.dumps(out, ensure_ascii=False))
        return

    console.print(
        f"media {out['id']}: [bold]{escape(out['name'])}[/] ({out['kind']}, "
        f"{out['content_type']}, {size_text(out['size'])})"
    )
    if out["url"]:
        console.print(f"url (works until {out['url_expires_at']}):")
        print(out["url"])  # whole, never wrapped: it is copied into campaigns
        named = f', filename = "{escape(out["name"])}"' if out["kind"] == "document" else ""
        console.print(f'in a campaign: \\[message] type = "media", media_url = that url{named}')
    else:
        console.print(
            "no URL yet: set GATECAST_PUBLIC_URL (where the gateway reaches gatecast) "
            f"or start `gatecast serve`, then run `gatecast media url {out['id']}`"
        )


@media_app.command("upload")
def upload_cmd(
    file: Annotated[Path, typer.Argument(help="an image, video, audio file or document")],
    days: Annotated[float | None, _DAYS] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print as JSON")] = False,
) -> None:
    """Store a media file and print its signed URL (for a media message's media_url).

    Its type is found from its content (JPEG, PNG; MP4, 3GPP; MP3, M4A, AAC, AMR, OGG;
    PDF, Office files, text) and its size is checked against its kind's limit (image
    5 MiB, video and audio 16 MiB, document 100 MiB)."""
    import getpass

    from campaigns.media import MediaRefused, store
    from gatecast.settings import get_settings
    from storage.types import utcnow

    settings = get_settings()
    engine = open_engine_or_fail(settings)
    try:
        try:
            with file.open("rb") as fh:
                item = store(
                    engine,
                    fh,
                    file.name,
                    now=utcnow(),
                    actor=f"cli:{getpass.getuser()}",
                    max_bytes=settings.media_max_bytes,
                    size=file.stat().st_size,
                )
        except OSError as exc:
            fail(f"{file}: {exc.strerror or exc}")
        except MediaRefused as exc:
            fail(str(exc))
        out = _described(engine, settings, item, days)
    finally:
        engine.dispose()
    _print(out, as_json)


@media_app.command("url")
def url_cmd(
    media_id: Annotated[int, id_argument("the media file's id (gatecast media list)")],
    days: Annotated[float | None, _DAYS] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print as JSON")] = False,
) -> None:
    """Print a freshly signed URL of a stored media file (nothing is changed)."""
    from campaigns.media import get
    from gatecast.settings import get_settings

    settings = get_settings()
    engine = open_engine_or_fail(settings)
    try:
        item = get(engine, media_id)
        if item is None:
            fail(f"media {media_id} not found (gatecast media list shows them)")
        out = _described(engine, settings, item, days)
    finally:
        engine.dispose()
    _print(out, as_json)


@media_app.command("list")
def list_cmd(
    as_json: Annotated[bool, typer.Option("--json", help="print as JSON")] = False,
) -> None:
    """The stored media files, newest first."""
    from campaigns.media import listing
    from campaigns.untrusted_files import size_text

    engine = open_engine_or_fail()
    try:
        items, total = listing(engine, limit=1000)
    finally:
        engine.dispose()
    if as_json:
        rows = [
            {
                "id": m.id,
                "name": m.name,
                "kind": m.kind,
                "content_type": m.content_type,
                "size": m.size,
                "created_by": m.created_by,
                "created_at": m.created_at.isoformat(),
            }
            for m in items
        ]
        print(json.dumps({"items": rows, "total": total}, ensure_ascii=False))
        return
    table = Table(title=f"media files ({total})")
    for column in ("id", "name", "kind", "type", "size", "by", "uploaded"):
        table.add_column(column)
    for m in items:
        table.add_row(
            str(m.id),
            escape(m.name),
            m.kind,
            m.content_type,
            size_text(m.size),
            escape(m.created_by),
            m.created_at.strftime("%Y-%m-%d %H:%M"),
        )
    console.print(table)


@media_app.command("uses")
def uses_cmd(
    media_id: Annotated[int, id_argument("the media file's id (gatecast media list)")],
    as_json: Annotated[bool, typer.Option("--json", help="print as JSON")] = False,
) -> None:
    """The campaigns whose message links to a stored file, and whether each will still
    send it (then the file cannot be deleted)."""
    from campaigns.media import get, uses

    engine = open_engine_or_fail()
    try:
        item = get(engine, media_id)
        if item is None:
            fail(f"media {media_id} not found (gatecast media list shows them)")
        found = uses(engine, item)
    finally:
        engine.dispose()
    if as_json:
        rows = [
            {"campaign_id": u.campaign_id, "name": u.name, "state": u.state, "keeps": u.keeps}
            for u in found
        ]
        print(json.dumps({"id": media_id, "uses": rows}, ensure_ascii=False))
        return
    if not found:
        console.print(f"media {media_id} ({escape(item.name)}) is used by no campaign")
        return
    table = Table(title=f"campaigns using media {media_id} ({escape(item.name)})")
    for column in ("campaign", "name", "state", "will still send"):
        table.add_column(column)
    for u in found:
        table.add_row(str(u.campaign_id), escape(u.name), u.state, "yes" if u.keeps else "no")
    console.print(table)


@media_app.command("delete")
def delete_cmd(
    media_id: Annotated[int, id_argument("the media file's id (gatecast media list)")],
) -> None:
    """Delete a stored file; refused, naming the campaigns, while one that will still
    send uses it (its links stop working once deleted)."""
    from campaigns.media import MediaInUse, delete

    engine = open_engine_or_fail()
    try:
        try:
            gone = delete(engine, media_id)
        except MediaInUse as exc:
            fail(str(exc))
    finally:
        engine.dispose()
    if gone is None:
        fail(f"media {media_id} not found (gatecast media list shows them)")
    console.print(f"media {media_id} ({escape(gone.name)}) deleted")


def register(app: typer.Typer) -> None:
    """Add ``gatecast media`` to the root app."""
    app.add_typer(media_app, name="media")
