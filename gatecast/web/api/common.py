"""Shared pieces of the API: pagination, error bodies, not-found helpers."""

from __future__ import annotations

from typing import Annotated, Any, Generic, TypeVar

from fastapi import HTTPException, Query, status
from pydantic import BaseModel, Field

T = TypeVar("T")

Limit = Annotated[int, Query(ge=1, le=1000, description="Page size")]
Offset = Annotated[int, Query(ge=0, description="Rows to skip")]


class Page(BaseModel, Generic[T]):
    """One page of a listing."""

    items: list[T]
    total: int = Field(description="Rows matching the filter, over all pages")
    limit: int
    offset: int


class Message(BaseModel):
    """A short confirmation or error text."""

    detail: str


def not_found(what: str, ident: object) -> HTTPException:
    """A 404 naming the missing thing."""
    return HTTPException(status.HTTP_404_NOT_FOUND, detail=f"{what} {ident} not found")


def field_error(loc: tuple[str | int, ...], msg: str, kind: str = "value_error") -> HTTPException:
    """A 422 in FastAPI's validation shape, naming the field by its path."""
    return HTTPException(
        status.HTTP_422_UNPROCESSABLE_CONTENT,
        detail=[{"type": kind, "loc": list(loc), "msg": msg}],
    )


#: answers every API route may give, for the OpenAPI document
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: {"model": Message, "description": "Missing or wrong API key"},
    413: {"model": Message, "description": "Request body larger than the import limit"},
}
