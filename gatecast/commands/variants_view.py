"""How the CLI prints A/B variants (``campaign show``) and the create's variety warning."""

from __future__ import annotations

from typing import Any

from rich.markup import escape
from rich.table import Table


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def variants_table(compared: dict[str, Any]) -> Table | None:
    """The variants side by side with the significance note and the A/B pick; None
    without variants."""
    if not compared:
        return None
    ab = compared.get("ab") or {}
    pick = ab.get("pick")
    title = f"Variants (compared by {compared['compared_by'].replace('_', ' ')})"
    table = Table(title=title, caption=escape(str(compared["note"])))
    for header in ("variant", "weight", "recipients", "sent", "delivered", "read", "replied"):
        table.add_column(header, justify="left" if header == "variant" else "right")
    table.add_column("opted out", justify="right")
    for v in compared["variants"]:
        name = v["name"] + (" (winner)" if pick and pick.get("winner") == v["name"] else "")
        table.add_row(
            escape(name),
            f"{v['weight']:g}",
            f"{v['recipients']:,}",
            f"{v['sent']:,}",
            _pct(v["delivered_rate"]),
            _pct(v["read_rate"]),
            _pct(v["reply_rate"]),
            _pct(v["opt_out_rate"]),
        )
    return table


def ab_text(compared: dict[str, Any]) -> str | None:
    """The A/B test in one line: its share, when it picks, and the pick once made."""
    ab = (compared or {}).get("ab")
    if not ab:
        return None
    text = f"{ab['test_share']:.0%} first, winner by {ab['pick_by']} after {ab['after']}"
    pick = ab.get("pick")
    if pick:
        by = pick["pick_by"]
        seen = "; ".join(
            f"{name}: {_pct(r.get(by))} of {r['sent']} sent" for name, r in pick["rates"].items()
        )
        text += f"; picked {pick['winner']} at {pick['at']} on {seen} ({pick['note']})"
    else:
        text += "; not picked yet"
    return text


__all__ = ["ab_text", "variants_table"]
