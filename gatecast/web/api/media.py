"""Media files: upload one (its type sniffed, its size checked per kind), list them, get
a signed public URL for a campaign's ``media_url``, see which campaigns use one, and
delete one no campaign that will still send uses (``campaigns.media``)."""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Form, Query, Request, Response, UploadFile
from pydantic import BaseModel, Field

from campaigns import media as domain
from gatecast.web.api.common import Id, Limit, Offset, Page, field_error, not_found, upload
from gatecast.web.auth import identify
from gatecast.web.context import AppContext, get_ctx
from gatecast.web.idempotency import IDEMPOTENT, run_once
from gatecast.web.problems import Problem

router = APIRouter(tags=["media"])
Ctx = Annotated[AppContext, Depends(get_ctx)]


class MediaPublic(BaseModel):
    """A stored media file and a signed URL of it, for a media message's ``media_url``
    (and its ``name`` for ``filename``)."""

    id: int
    name: str = Field(description="The file's name (cleaned), for the message's filename")
    kind: str = Field(description="image, video, audio or document: found from its content")
    content_type: str
    size: int = Field(description="Bytes")
    sha256: str
    created_by: str
    created_at: datetime
    url: str = Field(description="The signed public URL the gateway fetches (no sign-in)")
    url_expires_at: datetime


def link_base(ctx: AppContext, request: Request) -> str:
    """Where signed URLs point: ``GATECAST_PUBLIC_URL`` (where the gateway reaches this
    deployment), else the address the caller reached this server at."""
    return ctx.settings.public_url.strip() or str(request.base_url)


def public(
    ctx: AppContext, request: Request, item: domain.Media, days: float | None
) -> MediaPublic:
    """``item`` with a URL signed now for ``days`` (the setting's when None)."""
    try:
        url, expires_at = domain.signed_url(
            ctx.engine,
            item,
            link_base(ctx, request),
            now=ctx.clock(),
            days=days or ctx.settings.media_url_days,
        )
    except domain.MediaRefused:
        raise not_found("media", item.id) from None
    return MediaPublic(
        id=item.id,
        name=item.name,
        kind=item.kind,
        content_type=item.content_type,
        size=item.size,
        sha256=item.sha256,
        created_by=item.created_by,
        created_at=item.created_at,
        url=url,
        url_expires_at=expires_at,
    )


def _digest(upload: UploadFile) -> str:
    """The upload's SHA-256 (it is read again after)."""
    digest = hashlib.sha256()
    while chunk := upload.file.read(1024 * 1024):
        digest.update(chunk)
    upload.file.seek(0)
    return digest.hexdigest()


@router.post("/media", response_model=MediaPublic, status_code=201, dependencies=[IDEMPOTENT])
def post_media(
    request: Request,
    ctx: Ctx,
    file: Annotated[UploadFile, upload("An image, video, audio file or document (module notes)")],
    days: Annotated[
        float | None,
        Form(gt=0, le=domain.MAX_URL_DAYS, description="Days the URL works (default 30)"),
    ] = None,
) -> Response:
    """Upload a media file; its signed URL is the answer's ``url``.

    The type is found from the file's content, and its name must agree with it: images
    JPEG and PNG; videos MP4 and 3GPP; audio MP3, M4A, AAC, AMR and OGG; documents PDF,
    Word, Excel, PowerPoint and text. Each kind has WhatsApp's size limit (image 5 MiB,
    video and audio 16 MiB, document 100 MiB; GATECAST_MEDIA_MAX_BYTES lowers them). A
    type not taken answers 422 on the field ``file``; a file past its kind's limit 413
    ``media_too_large``. The URL needs no sign-in and works for ``days`` (default
    GATECAST_MEDIA_URL_DAYS): put it in a media message's ``media_url``.
    """
    name = file.filename or "upload"
    fields = {"file": name, "sha256": _digest(file), "days": days}
    identity = identify(request)
    actor = identity.actor if identity else ""

    def create() -> MediaPublic:
        try:
            stored = domain.store(
                ctx.engine,
                file.file,
                name,
                now=ctx.clock(),
                actor=actor,
                max_bytes=ctx.settings.media_max_bytes,
                size=file.size,
            )
        except domain.MediaTooLarge as exc:
            raise Problem(
                413,
                "media_too_large",
                str(exc),
                title="The file is too large to send",
                errors=[{"loc": ["body", "file"], "msg": str(exc), "type": "too_large"}],
                limit=exc.limit,
            ) from None
        except domain.MediaRefused as exc:
            raise field_error(("body", "file"), str(exc)) from None
        return public(ctx, request, stored, days)

    return run_once(request, ctx, fields, create, 201, "/api/v1/media/{id}")


@router.get("/media", response_model=Page[MediaPublic])
def list_media(
    request: Request, ctx: Ctx, limit: Limit = 50, offset: Offset = 0
) -> Page[MediaPublic]:
    """Uploaded media files, newest first, each with a URL signed now (nothing is stored)."""
    items, total = domain.listing(ctx.engine, limit=limit, offset=offset)
    return Page[MediaPublic](
        items=[public(ctx, request, m, None) for m in items],
        total=total,
        limit=limit,
        offset=offset,
    )


class MediaUsePublic(BaseModel):
    """A campaign whose file links to a stored file."""

    campaign_id: int
    name: str
    state: str
    keeps: bool = Field(description="The campaign will still send: the file cannot be deleted")


@router.get("/media/{media_id}/uses", response_model=list[MediaUsePublic])
def get_media_uses(ctx: Ctx, media_id: Id) -> list[MediaUsePublic]:
    """The campaigns (not deleted) whose file links to this media file, by id; one
    that will still send (scheduled, running, paused) ``keeps`` it."""
    found = domain.get(ctx.engine, media_id)
    if found is None:
        raise not_found("media", media_id)
    return [
        MediaUsePublic(campaign_id=u.campaign_id, name=u.name, state=u.state, keeps=u.keeps)
        for u in domain.uses(ctx.engine, found)
    ]


@router.delete(
    "/media/{media_id}",
    status_code=204,
    responses={409: {"description": "A scheduled, running or paused campaign uses it"}},
)
def delete_media(ctx: Ctx, media_id: Id) -> Response:
    """Delete a media file (its links stop working). Refused with 409 ``media_in_use``
    naming the campaigns while a scheduled, running or paused campaign's file links to
    it: they will still send it (cancel them, or change their message, first); 404 for
    an unknown id."""
    try:
        deleted = domain.delete(ctx.engine, media_id)
    except domain.MediaInUse as exc:
        raise Problem(
            409,
            "media_in_use",
            str(exc),
            title="The file is still used",
            campaigns=[u.campaign_id for u in exc.uses],
        ) from None
    if deleted is None:
        raise not_found("media", media_id)
    return Response(status_code=204)


@router.get("/media/{media_id}", response_model=MediaPublic)
def get_media(
    request: Request,
    ctx: Ctx,
    media_id: Id,
    days: Annotated[
        float | None,
        Query(gt=0, le=domain.MAX_URL_DAYS, description="Days the URL works (default 30)"),
    ] = None,
) -> MediaPublic:
    """One media file with a URL signed now for ``days`` (a fresh link; nothing is stored)."""
    found = domain.get(ctx.engine, media_id)
    if found is None:
        raise not_found("media", media_id)
    return public(ctx, request, found, days)
