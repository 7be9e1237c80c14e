"""Domain exceptions -> HTTP answers: 404 unknown ids, 409 refused lifecycle actions,
422 with field paths for campaign files (FastAPI's validation shape)."""

from __future__ import annotations

import re

from fastapi import FastAPI, Request, status
from fastapi.responses import JSONResponse

from campaigns.campaign_file import CampaignFileError
from campaigns.lifecycle import InvalidTransition
from campaigns.service import CampaignNotFound, CampaignSetupError, UnrenderableRecipients

_PART = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def path_to_loc(path: str, root: str = "body") -> list[str | int]:
    """``message.buttons[2].url`` -> ``["body", "message", "buttons", 2, "url"]``."""
    loc: list[str | int] = [root]
    for name, index in _PART.findall(path):
        loc.append(int(index) if index else name)
    return loc


def campaign_file_detail(exc: CampaignFileError, root: str = "body") -> list[dict[str, object]]:
    """Each problem of a campaign file as a validation error with ``loc`` and ``path``."""
    return [
        {
            "type": "campaign_file",
            "loc": path_to_loc(e.path, root),
            "path": e.path,
            "msg": e.message,
        }
        for e in exc.errors
    ]


def _campaign_file(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, CampaignFileError)
    return JSONResponse(
        {"detail": campaign_file_detail(exc)}, status.HTTP_422_UNPROCESSABLE_CONTENT
    )


def _not_found(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, CampaignNotFound)
    return JSONResponse({"detail": str(exc)}, status.HTTP_404_NOT_FOUND)


def _refused(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, InvalidTransition)
    if exc.current is None:
        return JSONResponse({"detail": str(exc)}, status.HTTP_404_NOT_FOUND)
    return JSONResponse(
        {"detail": str(exc), "state": exc.current, "wanted": exc.target},
        status.HTTP_409_CONFLICT,
    )


def _setup(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, CampaignSetupError)
    text = str(exc)
    loc = path_to_loc(exc.field) if exc.field else ["body"]
    detail: list[dict[str, object]] = [{"type": "campaign_setup", "loc": loc, "msg": text}]
    if exc.field:
        detail[0]["path"] = exc.field
    if isinstance(exc, UnrenderableRecipients):
        detail += [
            {"type": "unrenderable", "loc": ["body", "message"], "msg": f"{target}: {reason}"}
            for target, reason in exc.unrenderable[:100]
        ]
    return JSONResponse({"detail": detail}, status.HTTP_422_UNPROCESSABLE_CONTENT)


def install_error_handlers(app: FastAPI) -> None:
    """Register the handlers that translate domain errors for the API."""
    app.add_exception_handler(CampaignFileError, _campaign_file)
    app.add_exception_handler(CampaignNotFound, _not_found)
    app.add_exception_handler(InvalidTransition, _refused)
    app.add_exception_handler(CampaignSetupError, _setup)
