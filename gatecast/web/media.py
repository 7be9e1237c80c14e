"""The signed media URLs the gateway fetches: ``GET /media/{id}/{name}?expires=&signature=``.

Open (no key, no session: the gateway has neither); the signature is the credential
(:func:`campaigns.media.check_signature`). A link signed right but past its time answers
403 ``link_expired``; anything else that is not a valid link (no such file, another
name, a signature not ours, missing parameters) answers the same 404 as a path no route
has, so a guess learns nothing. A valid link answers the file's bytes, streamed a chunk
at a time from the database, with its type, length and name, and headers that keep a
browser from running it (``nosniff``, a sandboxing CSP). GET and HEAD change nothing.
"""

from __future__ import annotations

from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import Response, StreamingResponse

from campaigns import media as domain
from gatecast.web.context import AppContext
from gatecast.web.problems import Problem

router = APIRouter()
ROUTE = domain.PATH_PREFIX + "{media_id}/{name}"


def _nothing_here() -> Problem:
    """The 404 of any link that is not valid: the words of a path no route has."""
    return Problem(404, "not_found", "nothing is at this address")


@router.api_route(ROUTE, methods=["GET", "HEAD"], include_in_schema=False)
def serve_media(request: Request, media_id: str, name: str) -> Response:
    """The file of a valid signed link (module notes)."""
    ctx: AppContext = request.app.state.ctx
    if not media_id.isdigit() or len(media_id) > 18:
        raise _nothing_here()
    verdict, found = domain.check_signature(
        ctx.engine,
        int(media_id),
        name,
        request.query_params.get("expires", ""),
        request.query_params.get("signature", ""),
        now=ctx.clock(),
    )
    if verdict == domain.EXPIRED:
        raise Problem(
            403,
            "link_expired",
            "this link has expired: ask for a new one",
            title="The link has expired",
        )
    if verdict != domain.VALID or found is None:
        raise _nothing_here()
    headers = {
        "Content-Length": str(found.size),
        "Content-Disposition": f"inline; filename*=UTF-8''{quote(found.name, safe='')}",
        "X-Content-Type-Options": "nosniff",
        "Content-Security-Policy": "default-src 'none'; sandbox",
        "Cache-Control": "private, max-age=3600",
    }
    if request.method == "HEAD":
        return Response(status_code=200, media_type=found.content_type, headers=headers)
    return StreamingResponse(
        domain.chunks(ctx.engine, found), media_type=found.content_type, headers=headers
    )


__all__ = ["ROUTE", "router", "serve_media"]
