"""The variables a message can read for an audience: what the composer's "Insert a
variable" menu offers.

A contact's message sees ``name`` and ``phone`` and every attribute it has
(:mod:`campaigns.render`: :data:`~campaigns.render.BUILT_IN_VARIABLES`); a group's sees
``group`` (:data:`~campaigns.render.GROUP_VARIABLES`). The attributes listed are the ones
the audience's contacts have (lists, or a saved segment as it selects now; no list and
no segment: every contact; only names a template can write), each with how many of them
have it, since a variable a contact lacks stops its message
(:func:`campaigns.render.missing_variables`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from keyword import iskeyword
from typing import Any

from sqlalchemy import Engine

from campaigns.render import BUILT_IN_VARIABLES, GROUP_VARIABLES
from campaigns.segments import AudienceError, resolve
from storage.queries import audiences as aq


@dataclass(frozen=True)
class Variable:
    """One variable: ``name`` as a template writes it (``{{ name }}``), ``kind``
    ("built-in" or "attribute"), what it holds, and how many of the audience's contacts
    have it (None: every one)."""

    name: str
    kind: str
    description: str
    contacts: int | None = None


@dataclass(frozen=True)
class AudienceVariables:
    """The variables of an audience of ``contacts`` contacts (groups: their number)."""

    contacts: int
    variables: list[Variable]

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form."""
        return {"contacts": self.contacts, "variables": [v.__dict__ for v in self.variables]}


def audience_variables(
    engine: Engine,
    *,
    lists: Sequence[str] = (),
    segment: str | None = None,
    groups: int = 0,
) -> AudienceVariables:
    """The variables a message to ``groups`` groups (when above 0), to saved segment
    ``segment``, or to the contacts of ``lists`` can read. Raises :class:`AudienceError`
    whose field (``list``, ``segment``) names what does not exist (the text does not)."""
    if groups > 0:
        found = [Variable(n, "built-in", d) for n, d in GROUP_VARIABLES.items()]
        return AudienceVariables(groups, found)
    with engine.connect() as conn:
        definition: dict[str, Any] = {"lists": list(lists)}
        if segment is not None:
            saved = aq.segment_by_name(conn, segment.strip())
            if saved is None:
                raise AudienceError(f"no saved segment {segment!r}", "segment")
            definition = dict(saved["definition"])
        try:
            chosen = resolve(conn, definition)
        except AudienceError as exc:
            field = "segment" if segment is not None else "list"
            raise AudienceError(str(exc).split(": ", 1)[-1], field) from None
        counted = aq.audience_counts(conn, chosen)
        attributes = aq.audience_attribute_counts(conn, chosen)
    built_in = [Variable(n, "built-in", d) for n, d in BUILT_IN_VARIABLES.items()]
    seen = [
        Variable(name, "attribute", "imported with the contacts", n)
        for name, n in attributes
        # name and phone win over attributes (render); a template cannot name a key
        # that is not an identifier ("plan type")
        if name not in BUILT_IN_VARIABLES and name.isidentifier() and not iskeyword(name)
    ]
    return AudienceVariables(counted.matched - counted.excluded, built_in + seen)


__all__ = ["AudienceVariables", "Variable", "audience_variables"]
