"""Shared pieces of the API: ids and pagination as 64-bit numbers, error bodies, not-found
helpers."""

from __future__ import annotations

from typing import Annotated, Any, Generic, TypeVar

from fastapi import Query, status
from pydantic import BaseModel, Field

from gatecast.web.problems import Problem, field_problem

T = TypeVar("T")

#: the largest number a database id or count holds (a signed 64-bit integer)
INT64_MAX = 2**63 - 1

#: a row's id in a path or query: 1 to 2^63-1, anything else answers 422 naming it
Id = Annotated[int, Field(ge=1, le=INT64_MAX, description="A row's id")]
Limit = Annotated[int, Query(ge=1, le=1000, description="Page size")]
Offset = Annotated[int, Query(ge=0, le=INT64_MAX, description="Rows to skip")]


class Page(BaseModel, Generic[T]):
    """One page of a listing."""

    items: list[T]
    total: int = Field(description="Rows matching the filter, over all pages")
    limit: int
    offset: int


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


def not_found(what: str, ident: object) -> Problem:
    """A 404 naming the missing thing."""
    return Problem(status.HTTP_404_NOT_FOUND, "not_found", f"{what} {ident} not found")


def field_error(loc: tuple[str | int, ...], msg: str, kind: str = "value_error") -> Problem:
    """A 422 naming the field by its path (``("body", "list_name")``)."""
    return field_problem(loc, msg, kind)


_PROBLEM = {"model": ProblemPublic, "content": {"application/problem+json": {}}}

#: answers every API route may give, for the OpenAPI document
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: {**_PROBLEM, "description": "Missing or wrong API key"},
    403: {**_PROBLEM, "description": "The caller's role does not allow this (role_required)"},
    413: {**_PROBLEM, "description": "Request body larger than the import limit"},
    422: {**_PROBLEM, "description": "A field, query or file that is not valid"},
    500: {**_PROBLEM, "description": "An unexpected error (logged with a reference)"},
}
