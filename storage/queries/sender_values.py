"""Several senders' index probes in one statement: the senders as a ``VALUES`` list (a
CTE, which SQLite and PostgreSQL both read), each probe a subquery correlated to it.

A probe per sender per round trip cost the dispatch thread a statement per sender: with
500 senders, hundreds of round trips a second on PostgreSQL (docs/benchmarks.md, paced
senders). Each correlated subquery is still the index probe it was, so the cost per
sender stays flat however many rows the campaign holds.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from sqlalchemy import CTE, String, column, values

#: senders per statement (the bound parameters stay few)
CHUNK = 500


def sender_chunks(senders: Sequence[str]) -> Iterator[list[str]]:
    """``senders`` without repeats, in order, in chunks of :data:`CHUNK`."""
    unique = list(dict.fromkeys(senders))
    for start in range(0, len(unique), CHUNK):
        yield unique[start : start + CHUNK]


def senders_cte(senders: Sequence[str]) -> CTE:
    """``WITH wanted(sender) AS (VALUES ...)``: correlate probes to ``.c.sender``."""
    listed = values(column("sender", String), name="wanted").data([(s,) for s in senders])
    return listed.cte("wanted")


def pairs_cte(pairs: Sequence[tuple[str, str]]) -> CTE:
    """``WITH wanted(sender, target) AS (VALUES ...)``: join on both columns."""
    listed = values(column("sender", String), column("target", String), name="wanted")
    return listed.data(list(pairs)).cte("wanted")


__all__ = ["CHUNK", "pairs_cte", "sender_chunks", "senders_cte"]
