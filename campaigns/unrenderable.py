"""Who cannot get a campaign's message, and why, in words a person acts on.

A recipient whose message does not render is skipped with the reason
(``campaigns.render``: "missing variable 'coupon'"). Counted one by one that says little
on a list of thousands, so a scan (``campaigns.service``) tallies them here by cause: each
variable the message reads that the recipient has no value for ("coupon is missing"),
else the render error itself, with how many recipients it hits and the first few names.
:meth:`Unrenderable.words` says it as "coupon is missing for 37 of 37 contacts: Ana,
Bob, Carl, Dan, Eve and 32 more", the text the final check, a refused create and the
dashboard show.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from campaigns.render import ContactData

#: names listed per cause (all are counted)
NAMES_SHOWN = 5
#: causes told apart (the rest are counted under "other reasons")
MAX_CAUSES = 20


@dataclass(frozen=True)
class Cause:
    """One reason recipients cannot get the message: ``variable`` (the one they lack) or
    ``reason`` (the render error, for a cause other than a missing variable)."""

    variable: str | None
    reason: str | None
    count: int
    names: list[str]

    def what(self) -> str:
        """ "coupon is missing", or the render error."""
        return f"{self.variable} is missing" if self.variable else str(self.reason)


@dataclass
class Unrenderable:
    """The recipients of one scan whose message does not render, tallied by cause."""

    count: int = 0
    _causes: dict[tuple[str | None, str | None], Cause] = field(default_factory=dict)

    def add(self, contact: ContactData, target: str, reason: str, needed: Iterable[str]) -> None:
        """Count one recipient: ``needed`` are the variables the message reads."""
        self.count += 1
        have = contact.variables()
        missing = [v for v in needed if v not in have]
        keys: list[tuple[str | None, str | None]] = [(v, None) for v in missing]
        keys = keys or [(None, reason)]
        who = contact.name or target
        for variable, why in keys:
            key: tuple[str | None, str | None] = (variable, why)
            if key not in self._causes and len(self._causes) >= MAX_CAUSES:
                key = (None, "other reasons")
                variable, why = key
            found = self._causes.get(key) or Cause(variable, why, 0, [])
            names = found.names if len(found.names) >= NAMES_SHOWN else [*found.names, who]
            self._causes[key] = Cause(variable, why, found.count + 1, names)

    def causes(self) -> list[Cause]:
        """The causes, the most common first."""
        return sorted(self._causes.values(), key=lambda c: -c.count)

    def words(self, reachable: int, noun: str = "contacts") -> str:
        """ "coupon is missing for 37 of 37 contacts: Ana, Bob, ... and 32 more" per cause
        (``reachable``: the recipients the campaign would message, opted out left out);
        "" when every message renders."""
        parts = []
        for cause in self.causes():
            names = ", ".join(cause.names)
            more = cause.count - len(cause.names)
            if more > 0:
                names += f" and {more:,} more"
            parts.append(f"{cause.what()} for {cause.count:,} of {reachable:,} {noun}: {names}")
        return "; ".join(parts)


__all__ = ["NAMES_SHOWN", "Cause", "Unrenderable"]
