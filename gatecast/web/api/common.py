"""Shared pieces of the API: ids and pagination as 64-bit numbers, error bodies, not-found
helpers."""

from __future__ import annotations

from typing import Annotated, Any, Generic, TypeVar

from fastapi import File, Query, Request, status
from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic_core import PydanticCustomError

from gatecast.web.problems import Problem, field_problem
from gateway.text import describe, unstorable_at

T = TypeVar("T")

#: the largest number a database id or count holds (a signed 64-bit integer)
INT64_MAX = 2**63 - 1

#: a row's id in a path or query: 1 to 2^63-1, anything else answers 422 naming it
Id = Annotated[int, Field(ge=1, le=INT64_MAX, description="A row's id")]
Limit = Annotated[int, Query(ge=1, le=1000, description="Page size")]
Offset = Annotated[
    int,
    Query(
        ge=0,
        le=INT64_MAX,
        description="Rows to skip (slower as rows grow: a listing with `cursor` prefers it)",
    ),
]
#: where a cursor-walked listing's page starts (decision 39 in docs/architecture.md)
Cursor = Annotated[
    str | None,
    Query(
        max_length=200,
        description="The `next_cursor` or `prev_cursor` of an earlier page, or `last` for "
        "the last page; none: the first page. Same cost on any page, unlike `offset`",
    ),
]


class RequestBody(BaseModel):
    """The base of every JSON request body: a field it does not know is refused (422
    naming it: a misspelt field is a mistake, never silently dropped), and so is a text
    holding a character no database stores (NUL, a lone surrogate: :mod:`gateway.text`),
    anywhere in the field's value."""

    model_config = ConfigDict(extra="forbid")

    @field_validator("*", check_fields=False)
    @classmethod
    def _storable(cls, value: Any) -> Any:
        if isinstance(value, BaseModel):  # a nested body checks its own fields
            return value
        found = unstorable_at(value)
        if found is not None:
            inside, problem = found
            raise PydanticCustomError(
                "unstorable_text",
                "{where}{problem}",
                {"where": inside and f"{inside} ", "problem": problem},
            )
        return value


async def refuse_unstorable_parameters(request: Request) -> None:
    """A query or path parameter holding a character no database stores is refused (422
    naming it), on every route of the API and the dashboard (:mod:`gateway.text`)."""
    for where, params in (("query", request.query_params), ("path", request.path_params)):
        items = params.multi_items() if hasattr(params, "multi_items") else params.items()
        for name, value in items:
            problem = describe(name) or (describe(value) if isinstance(value, str) else None)
            if problem is not None:
                raise field_problem((where, name), problem, "unstorable_text")


class Page(BaseModel, Generic[T]):
    """One page of a listing."""

    items: list[T]
    total: int = Field(description="Rows matching the filter, over all pages")
    limit: int
    offset: int


class CursorPage(Page[T], Generic[T]):
    """One page of a listing walked by cursor: pass ``next_cursor`` (or ``prev_cursor``)
    as ``cursor`` for the next (previous) page."""

    total_exact: bool = Field(
        True, description="false: at least `total` match (the count stopped there)"
    )
    next_cursor: str | None = Field(None, description="The next page's cursor; null: the last")
    prev_cursor: str | None = Field(None, description="The previous page's cursor; null: the first")

    @classmethod
    def of(cls, found: Any, items: list[T], *, limit: int, offset: int) -> Any:
        """The answer of a domain page (``campaigns.paging.CursorPage``) with ``items``
        as the API shows them."""
        return cls(
            items=items,
            total=found.total,
            total_exact=found.total_exact,
            limit=limit,
            offset=offset,
            next_cursor=found.next_cursor,
            prev_cursor=found.prev_cursor,
        )


def bad_cursor(msg: str) -> Problem:
    """A 400 naming the ``cursor`` query parameter."""
    return field_problem(("query", "cursor"), msg, "invalid_cursor", status.HTTP_400_BAD_REQUEST)


def cursor_or_offset(cursor: str | None, offset: int) -> None:
    """A 400 naming ``cursor`` when both a cursor and an offset are given."""
    if cursor is not None and offset:
        raise bad_cursor("give either cursor or offset, not both (cursor is the faster)")


class FieldErrorPublic(BaseModel):
    """One field at fault: its path (``["body", "list_name"]``) and what is wrong."""

    loc: list[str | int]
    msg: str
    type: str


class ProblemPublic(BaseModel):
    """An error answer (RFC 9457 problem details, ``application/problem+json``)."""

    type: str = Field(description="tag:gatecast,2026:problem/<code>")
    title: str
    status: int
    detail: str = Field(description="What went wrong, in one sentence")
    code: str = Field(description="Stable name of the problem, e.g. not_found")
    errors: list[FieldErrorPublic] | None = Field(None, description="The fields at fault")
    request_id: str | None = Field(
        None, description="The answer's X-Request-Id: name it when you ask for support"
    )


def not_found(what: str, ident: object) -> Problem:
    """A 404 naming the missing thing."""
    return Problem(status.HTTP_404_NOT_FOUND, "not_found", f"{what} {ident} not found")


def field_error(loc: tuple[str | int, ...], msg: str, kind: str = "value_error") -> Problem:
    """A 422 naming the field by its path (``("body", "list_name")``)."""
    return field_problem(loc, msg, kind)


#: the media type a download is also declared as, for generators that know no other binary
#: type (decision 69 in docs/architecture.md)
OCTET_STREAM = "application/octet-stream"
#: a spreadsheet download (report.xlsx, a contact export)
XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
#: a CSV download, as sent
CSV = "text/csv; charset=utf-8"
_BINARY = {"schema": {"type": "string", "format": "binary"}}


def upload(description: str) -> Any:
    """A multipart file field declared ``format: binary`` in the OpenAPI document (FastAPI
    writes only ``contentMediaType``, which generators read as a text field): generated
    clients send it as a file part (decision 69)."""
    return File(description=description, json_schema_extra={"format": "binary"})


def download(description: str, *media_types: str) -> dict[int | str, dict[str, Any]]:
    """The 200 of a download route, for its ``responses``: ``text/csv`` as a string, any
    other type as binary and also as ``application/octet-stream`` (which the route answers
    to a client accepting only that: :func:`labelled`), binary types first so a generator
    that takes the first known type reads every format as bytes (decision 69)."""
    binary = [m for m in media_types if not m.startswith("text/")]
    content: dict[str, Any] = {m: _BINARY for m in binary}
    if binary:
        content[OCTET_STREAM] = _BINARY
    content.update({m: {"schema": {"type": "string"}} for m in media_types if m not in binary})
    return {200: {"description": description, "content": content}}


def labelled(request: Request, media_type: str) -> str:
    """``media_type``, or ``application/octet-stream`` when the request's ``Accept`` names
    that and not ``media_type`` (a generated client asking for bytes)."""
    accept = request.headers.get("accept", "")
    named = {part.split(";", 1)[0].strip().lower() for part in accept.split(",")}
    wanted = media_type.split(";", 1)[0].lower()
    return OCTET_STREAM if OCTET_STREAM in named and wanted not in named else media_type


_PROBLEM = {"model": ProblemPublic, "content": {"application/problem+json": {}}}
_PROBLEM_REF = {"$ref": "#/components/schemas/ProblemPublic"}

#: answers every API route may give, for the OpenAPI document
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: {**_PROBLEM, "description": "Missing or wrong API key"},
    403: {**_PROBLEM, "description": "The caller's role does not allow this (role_required)"},
    422: {**_PROBLEM, "description": "A field, query or file that is not valid"},
    500: {**_PROBLEM, "description": "An unexpected error (logged with a reference)"},
}

#: a route that may find no such id (added to every route with a path parameter)
NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {**_PROBLEM, "description": "No such id (code not_found)"}
}
#: a listing walked by cursor: a cursor it did not give out
BAD_CURSOR: dict[int | str, dict[str, Any]] = {
    400: {**_PROBLEM, "description": "A cursor this listing did not give out (names `cursor`)"}
}
#: a lifecycle action the campaign's state does not allow
REFUSED_TRANSITION: dict[int | str, dict[str, Any]] = {
    409: {
        **_PROBLEM,
        "description": "The campaign's state does not allow this (code invalid_transition)",
    }
}
#: deleting, archiving or unarchiving a campaign its state does not allow
DELETE_REFUSED: dict[int | str, dict[str, Any]] = {
    409: {
        **_PROBLEM,
        "description": "The campaign is already deleted (code campaign_deleted) or, for a "
        "delete, running (code delete_refused)",
    }
}
#: a test send refused by the state of things, or past its hourly limit
TEST_SEND_REFUSED: dict[int | str, dict[str, Any]] = {
    409: {
        **_PROBLEM,
        "description": "No sender can send now, the number opted out, or the campaign is "
        "deleted (code test_send_conflict); or the first request with this Idempotency-Key "
        "is still running (code idempotency_key_in_progress)",
    },
    429: {
        **_PROBLEM,
        "description": "Past the hourly limit of test sends (code test_send_too_many); "
        "Retry-After says when to try again",
        "headers": {
            "Retry-After": {"description": "Seconds to wait", "schema": {"type": "integer"}}
        },
    },
}
#: a creating route: a repeat of an ``Idempotency-Key`` whose first request still runs
IN_PROGRESS: dict[int | str, dict[str, Any]] = {
    409: {
        **_PROBLEM,
        "description": "The first request with this Idempotency-Key is still running "
        "(code idempotency_key_in_progress)",
    }
}
#: an operation at the gateway: refused because of the instance's state, or the gateway
#: failed
GATEWAY_ANSWERS: dict[int | str, dict[str, Any]] = {
    409: {
        **_PROBLEM,
        "description": "The instance no longer exists at the gateway (instance_gone) or is "
        "reconnecting (instance_reconnecting)",
    },
    502: {
        **_PROBLEM,
        "description": "The gateway refused or could not be reached (code gateway_error)",
    },
}


_LOCATION = {
    "description": "Where the new thing is (a GET there answers it); none when nothing is "
    "stored (a composer's test send)",
    "schema": {"type": "string"},
}


def problem_answers(document: dict[str, Any]) -> dict[str, Any]:
    """Every error answer of ``document`` (an OpenAPI document, changed in place) as
    ``application/problem+json`` with the :class:`ProblemPublic` schema: what the server
    sends (FastAPI files a response model under ``application/json``, and its own 422
    under its validation schema); every 201 with its ``Location`` header."""
    for item in document.get("paths", {}).values():
        for operation in item.values():
            for code, answer in operation.get("responses", {}).items():
                if code[:1] in ("4", "5"):
                    answer["content"] = {"application/problem+json": {"schema": _PROBLEM_REF}}
                elif code == "201":
                    answer.setdefault("headers", {})["Location"] = _LOCATION
    schemas = document.get("components", {}).get("schemas", {})
    for unused in ("HTTPValidationError", "ValidationError"):
        schemas.pop(unused, None)
    return document
