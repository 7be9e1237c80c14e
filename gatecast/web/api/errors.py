"""Domain exceptions -> problem details: 404 unknown ids, 409 refused lifecycle actions,
422 with field paths for campaign files (see :mod:`gatecast.web.problems`)."""

from __future__ import annotations

import re
from dataclasses import asdict

from fastapi import FastAPI, Request, status
from fastapi.responses import Response

from campaigns.archive import DeleteRefused
from campaigns.campaign_file import CampaignFileError
from campaigns.lifecycle import InvalidTransition
from campaigns.service import (
    CampaignDeleted,
    CampaignNotFound,
    CampaignSetupError,
    UnrenderableRecipients,
)
from gatecast.web.problems import Problem, errors_detail, install_problem_handlers, web_terms

_PART = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def path_to_loc(path: str, root: str = "body") -> list[str | int]:
    """``message.buttons[2].url`` -> ``["body", "message", "buttons", 2, "url"]``."""
    loc: list[str | int] = [root]
    for name, index in _PART.findall(path):
        loc.append(int(index) if index else name)
    return loc


def campaign_file_errors(exc: CampaignFileError, root: str = "body") -> list[dict[str, object]]:
    """Each problem of a campaign file as a field error with ``loc`` and ``path``."""
    return [
        {
            "type": "campaign_file",
            "loc": path_to_loc(e.path, root),
            "path": e.path,
            "msg": e.message,
        }
        for e in exc.errors
    ]


def _campaign_file(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, CampaignFileError)
    errors = campaign_file_errors(exc)
    return Problem(
        status.HTTP_422_UNPROCESSABLE_CONTENT,
        "invalid_campaign",
        errors_detail(errors, "the campaign"),
        title="The campaign is not valid",
        errors=errors,
    ).response()


def _not_found(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, CampaignNotFound)
    return Problem(status.HTTP_404_NOT_FOUND, "not_found", web_terms(str(exc))).response()


def _refused(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, InvalidTransition)
    if exc.current is None:
        return Problem(status.HTTP_404_NOT_FOUND, "not_found", web_terms(str(exc))).response()
    return Problem(
        status.HTTP_409_CONFLICT,
        "invalid_transition",
        web_terms(str(exc)),
        title="The campaign's state does not allow this",
        state=exc.current,
        wanted=exc.target,
    ).response()


def _deleted(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, CampaignDeleted | DeleteRefused)
    code = "campaign_deleted" if isinstance(exc, CampaignDeleted) else "delete_refused"
    return Problem(status.HTTP_409_CONFLICT, code, web_terms(str(exc))).response()


def _setup(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, CampaignSetupError)
    text = web_terms(str(exc))
    loc = path_to_loc(exc.field) if exc.field else ["body"]
    errors: list[dict[str, object]] = [{"type": "campaign_setup", "loc": loc, "msg": text}]
    if exc.field:
        errors[0]["path"] = exc.field
    if isinstance(exc, UnrenderableRecipients):
        return _unrenderable(exc, text, errors)
    return Problem(
        status.HTTP_422_UNPROCESSABLE_CONTENT,
        "campaign_setup",
        text,
        title="The campaign cannot be set up",
        errors=errors,
    ).response()


def _unrenderable(
    exc: UnrenderableRecipients, text: str, errors: list[dict[str, object]]
) -> Response:
    """A create refused for recipients whose message cannot render: ``nothing_renders``
    (none renders) or ``campaign_setup`` (``?strict=true``), with the causes (``missing``:
    each variable, how many lack it, the first names) and the first recipients."""
    listed = [{"target": t, "reason": r} for t, r in exc.unrenderable[:100]]
    if not exc.nothing:  # ?strict=true: one entry per recipient, as before
        errors += [
            {"type": "unrenderable", "loc": ["body", "message"], "msg": f"{t}: {r}"}
            for t, r in exc.unrenderable[:100]
        ]
    return Problem(
        status.HTTP_422_UNPROCESSABLE_CONTENT,
        "nothing_renders" if exc.nothing else "campaign_setup",
        text,
        title="Nothing would be sent" if exc.nothing else "The campaign cannot be set up",
        errors=errors,
        unrenderable_count=exc.total,
        recipients=exc.reachable,
        unrenderable_words=exc.words,
        missing=[asdict(c) for c in exc.causes],
        unrenderable=listed,
    ).response()


def install_error_handlers(app: FastAPI) -> None:
    """Register the problem-details handlers and the domain errors' translations."""
    install_problem_handlers(app)
    app.add_exception_handler(CampaignFileError, _campaign_file)
    app.add_exception_handler(CampaignNotFound, _not_found)
    app.add_exception_handler(InvalidTransition, _refused)
    app.add_exception_handler(CampaignSetupError, _setup)
    app.add_exception_handler(CampaignDeleted, _deleted)
    app.add_exception_handler(DeleteRefused, _deleted)
