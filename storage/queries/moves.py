"""A named move of ``deliveries.state`` (:class:`storage.states.Move`) as SQL."""

from __future__ import annotations

from sqlalchemy import ColumnElement, literal_column

from storage import tables
from storage.states import ALL, Move

_d = tables.deliveries


def _checked(move: Move) -> Move:
    """``move``, once its states are known ones (they are written into SQL inline)."""
    unknown = {*move.from_states, move.to} - set(ALL)
    if unknown or not move.from_states:
        raise ValueError(f"move {move.name!r}: not delivery states: {sorted(unknown)}")
    return move


def may_move(move: Move) -> ColumnElement[bool]:
    """The rows ``move`` may take: ``state`` is one of its from-states, written inline (a
    literal, as the partial indexes' predicates are: a bound parameter keeps SQLite and
    PostgreSQL's generic plans off them)."""
    _checked(move)
    inline: list[ColumnElement[str]] = [literal_column(f"'{s}'") for s in move.from_states]
    return _d.c.state == inline[0] if len(inline) == 1 else _d.c.state.in_(inline)


def may_move_sql(move: Move, alias: str) -> str:
    """:func:`may_move` as text, for a statement written in SQL (``alias``: the table's)."""
    states = [f"'{s}'" for s in _checked(move).from_states]
    if len(states) == 1:
        return f"{alias}.state = {states[0]}"
    return f"{alias}.state IN ({', '.join(states)})"


def new_state_sql(move: Move) -> str:
    """``move``'s state as an SQL literal (``state = <this>``)."""
    return f"'{_checked(move).to}'"


__all__ = ["may_move", "may_move_sql", "new_state_sql"]
