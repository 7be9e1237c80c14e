"""How the terminal shows a campaign's hold (:mod:`scheduler.holds`): the same words as
every face, with the CLI command beside the action."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scheduler.holds import CampaignHold, Hold


def _todo(hold: Hold) -> str | None:
    if hold.action is None:
        return None
    return hold.action + (f" (`{hold.command}`)" if hold.command else "")


def hold_lines(hold: CampaignHold) -> list[str]:
    """``Waiting: ...`` and what to do, for ``campaign show`` (nothing when not held)."""
    lines: list[str] = []
    if hold.primary is not None:
        lines.append(f"Waiting: {hold.primary.words}")
        if (todo := _todo(hold.primary)) is not None:
            lines.append(f"  to do: {todo}")
    elif hold.senders:
        lines.append("Waiting: some senders wait; the others send")
    for h in hold.senders:
        lines.append(f"  sender {h.sender}: {h.words}")
        if (todo := _todo(h)) is not None:
            lines.append(f"    to do: {todo}")
    return lines


def progress_text(hold: CampaignHold) -> str:
    """The ``campaign run`` progress line's tail: `` · waiting: ...`` (empty when not held)."""
    line = hold.line()
    return "" if line is None else f" · waiting: {line}"


__all__ = ["hold_lines", "progress_text"]
