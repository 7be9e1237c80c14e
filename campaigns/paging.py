"""A page of records and how many match in all: what a listing returns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of records and how many match in all."""

    items: list[T]
    total: int


__all__ = ["Page"]
