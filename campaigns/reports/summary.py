"""A campaign's report summary (counts, rates, median times) and the XLSX "Summary" sheet
with its funnel chart."""

from __future__ import annotations

from array import array
from dataclasses import asdict, dataclass, field
from typing import Any

from sqlalchemy import Connection, Engine, Table, func, select

from campaigns import variants
from campaigns.campaign_file import stored_spec
from campaigns.reports.columns import XLSX_DATE_FORMAT, neutralise
from storage import reports as report_store
from storage import states, tables
from storage.queries.campaigns import opted_out_count
from storage.queries.tallies import delivery_counts
from storage.reports import sql as report_sql

_d: Table = tables.deliveries
_campaigns: Table = tables.campaigns

#: the number format of the summary's rates
XLSX_RATE_FORMAT = "0.0%"
#: the name of the workbook's sheet of recipients
DELIVERIES_SHEET = "Deliveries"


class ReportError(ValueError):
    """A report that cannot be written as asked (unknown format, unknown campaign)."""


@dataclass(frozen=True)
class ReportSummary:
    """Counts and rates of one campaign."""

    campaign_id: int
    name: str
    state: str
    total: int
    counts: dict[str, int]
    sent: int  # rows that left (sent_at set), whatever happened next
    delivered: int
    read: int
    failed: int
    replied: int
    opted_out: int
    delivery_rate: float | None  # delivered / sent
    read_rate: float | None  # read / sent
    median_seconds_to_delivery: float | None  # of delivered_at - sent_at
    median_seconds_to_read: float | None  # of read_at - sent_at
    #: A/B variants compared (``campaigns.variants.campaign_comparison``); {} without
    variants: dict[str, Any] = field(default_factory=dict)
    #: per button and list row: ``kind`` (button, row), ``id``, ``title``, ``taps`` (the
    #: recipients whose first tap it was) and ``rate`` (taps / sent); the message's own
    #: quick-reply buttons and rows first, in order, then any other id tapped
    taps: list[dict[str, Any]] = field(default_factory=list)
    #: the follow-up steps (decision 70): ``step``, ``condition``, ``message_type``,
    #: ``total`` (contacts it was due for so far) and ``counts`` per state; [] without
    steps: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return asdict(self)


def campaign_row(conn: Connection, campaign_id: int) -> Any:
    """The campaign's id, name, state and creation time; :class:`ReportError` when there
    is no such campaign."""
    row = conn.execute(
        select(
            _campaigns.c.id, _campaigns.c.name, _campaigns.c.state, _campaigns.c.created_at
        ).where(_campaigns.c.id == campaign_id)
    ).one_or_none()
    if row is None:
        raise ReportError(f"campaign {campaign_id} does not exist")
    return row


def _rate(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def _median_seconds(micros: array[int]) -> float:
    """Median, in seconds, of an int64 array of microseconds, as ``statistics.median`` of
    the ``timedelta.total_seconds()`` floats gives it (exact below 2**53 us, 285 years)
    without a Python object per value: numpy partitions one copy of the buffer (a list
    of floats would take 33 MB for 750k deliveries)."""
    import numpy as np

    n = len(micros)
    k = n // 2
    middle = np.partition(np.frombuffer(micros, dtype=np.int64), [k - 1, k] if n % 2 == 0 else k)
    if n % 2:
        return float(middle[k]) / 1e6
    return (float(middle[k - 1]) / 1e6 + float(middle[k]) / 1e6) / 2


def _median_or_none(micros: array[int]) -> float | None:
    return round(_median_seconds(micros), 3) if micros else None


def _choices(spec: Any) -> list[tuple[str, str, str]]:
    """(kind, id, title) of the quick-reply buttons and list rows of the campaign's
    message and its variants, in order, once each."""
    if spec is None:
        return []
    out: dict[tuple[str, str], str] = {}
    for message in (spec.message, *spec.message.variants):
        for b in message.buttons:
            if b.kind == "quick_reply" and b.id:
                out.setdefault(("button", b.id), b.display_text)
        for section in message.sections:
            for row in section.rows:
                out.setdefault(("row", row.row_id), row.title)
    return [(kind, cid, title) for (kind, cid), title in out.items()]


def tap_rates(conn: Connection, campaign_id: int, spec: Any, sent: int) -> list[dict[str, Any]]:
    """The campaign's taps per button and list row (:attr:`ReportSummary.taps`)."""
    tapped = {
        (("button", str(b)) if b is not None else ("row", str(r))): (int(n), t)
        for b, r, n, t in conn.execute(
            select(
                _d.c.tapped_button_id,
                _d.c.tapped_row_id,
                func.count(),
                func.max(_d.c.tapped_title),
            )
            .where(
                _d.c.campaign_id == campaign_id,
                (_d.c.tapped_button_id.is_not(None)) | (_d.c.tapped_row_id.is_not(None)),
            )
            .group_by(_d.c.tapped_button_id, _d.c.tapped_row_id)
        )
    }
    choices = _choices(spec)
    known = {(kind, cid) for kind, cid, _title in choices}
    extra = sorted(k for k in tapped if k not in known)
    rows = choices + [(kind, cid, str(tapped[kind, cid][1] or "")) for kind, cid in extra]
    out: list[dict[str, Any]] = []
    for kind, cid, title in rows:
        n = tapped.get((kind, cid), (0, None))[0]
        out.append({"kind": kind, "id": cid, "title": title, "taps": n, "rate": _rate(n, sent)})
    return out


def campaign_taps(engine: Engine, campaign_id: int) -> list[dict[str, Any]]:
    """The campaign's taps per button and list row (the campaign page's table); [] without
    reading its rows when its message has no quick-reply button or list row (nothing to
    tap: the page of a text campaign costs no scan)."""
    with engine.connect() as conn:
        raw = conn.execute(select(_campaigns.c.spec).where(_campaigns.c.id == campaign_id)).scalar()
        spec = stored_spec(raw, campaign_id) if raw else None
        if not _choices(spec):
            return []
        sent = conn.execute(
            select(func.count(_d.c.sent_at)).where(_d.c.campaign_id == campaign_id)
        ).scalar_one()
        return tap_rates(conn, campaign_id, spec, int(sent))


def read_summary(conn: Connection, campaign_id: int) -> ReportSummary:
    """The summary of campaign ``campaign_id`` on ``conn``."""
    camp = campaign_row(conn, campaign_id)
    counts = delivery_counts(conn, campaign_id)
    agg = conn.execute(
        select(
            func.count(_d.c.sent_at),
            func.count(_d.c.delivered_at),
            func.count(_d.c.read_at),
            func.count(_d.c.replied_at),
        ).where(_d.c.campaign_id == campaign_id)
    ).one()
    to_delivery = report_store.micros_since_sent(conn, campaign_id, to="delivered")
    to_read = report_store.micros_since_sent(conn, campaign_id, to="read")
    sent, delivered, read, replied = (int(x) for x in agg)
    raw = conn.execute(select(_campaigns.c.spec).where(_campaigns.c.id == campaign_id)).scalar()
    spec = stored_spec(raw or {}, campaign_id) if raw else None
    compared = variants.campaign_comparison(conn, campaign_id, spec) if spec else {}
    return ReportSummary(
        campaign_id=int(camp.id),
        name=str(camp.name),
        state=str(camp.state),
        total=sum(counts.values()),
        counts=counts,
        sent=sent,
        delivered=delivered,
        read=read,
        failed=counts.get(states.FAILED, 0),
        replied=replied,
        opted_out=opted_out_count(conn, campaign_id),
        delivery_rate=_rate(delivered, sent),
        read_rate=_rate(read, sent),
        median_seconds_to_delivery=_median_or_none(to_delivery),
        median_seconds_to_read=_median_or_none(to_read),
        variants=compared,
        taps=tap_rates(conn, campaign_id, spec, sent),
        steps=_steps(conn, campaign_id, spec),
    )


def _steps(conn: Connection, campaign_id: int, spec: Any) -> list[dict[str, Any]]:
    """The follow-up steps with their counts (:attr:`ReportSummary.steps`)."""
    if spec is None or not spec.steps:
        return []
    from campaigns.followups import step_counts

    return [
        {
            "step": s.step,
            "condition": s.condition,
            "message_type": s.message_type,
            "campaign_id": s.campaign_id,
            "total": sum(s.counts.values()),
            "counts": s.counts,
        }
        for s in step_counts(conn, campaign_id, spec)
    ]


def report_summary(engine: Engine, campaign_id: int) -> ReportSummary:
    """The summary of campaign ``campaign_id`` (counts, rates, median times to delivery
    and to read)."""
    with engine.connect() as conn:
        return read_summary(conn, campaign_id)


#: the variants' table in the summary sheet: header and the figure each column shows
_VARIANT_COLUMNS = (
    ("Variant", "name"),
    ("Weight", "weight"),
    ("Recipients", "recipients"),
    ("Sent", "sent"),
    ("Delivered rate", "delivered_rate"),
    ("Read rate", "read_rate"),
    ("Reply rate", "reply_rate"),
    ("Opt-out rate", "opt_out_rate"),
)


def _variant_rows(ws: Any, compared: dict[str, Any], rate: Any) -> None:
    """The A/B variants side by side, the significance note and the A/B pick (if any)."""
    if not compared:
        return
    ws.append([])
    ws.append([header for header, _key in _VARIANT_COLUMNS])
    for v in compared["variants"]:
        ws.append(
            [
                rate(v[key])
                if key.endswith("_rate")
                else neutralise(str(v[key]))
                if key == "name"
                else v[key]
                for _header, key in _VARIANT_COLUMNS
            ]
        )
    ws.append(["Compared by", compared["compared_by"]])
    ws.append(["Significance", neutralise(compared["note"])])
    pick = (compared.get("ab") or {}).get("pick")
    if pick:
        ws.append(["A/B winner", neutralise(str(pick["winner"])), str(pick["at"])])
        ws.append(["Picked on", neutralise(str(pick["note"]))])


def _step_rows(ws: Any, steps: list[dict[str, Any]]) -> None:
    """The follow-up steps and their counts (none: no table)."""
    if not steps:
        return
    ws.append([])
    ws.append(["Step", "When", "Due so far", "Sent", "Waiting", "Skipped"])
    for s in steps:
        c = s["counts"]
        sent = sum(c.get(k, 0) for k in (states.SENT, states.DELIVERED, states.READ))
        waiting = c.get(states.QUEUED, 0) + c.get(states.SENDING, 0)
        skipped = c.get(states.SKIPPED, 0)
        ws.append([s["step"], neutralise(s["condition"]), s["total"], sent, waiting, skipped])


def _tap_rows(ws: Any, taps: list[dict[str, Any]], rate: Any) -> None:
    """The taps per button and list row (none: no table)."""
    if not taps:
        return
    ws.append([])
    ws.append(["Tapped", "Id", "Title", "Taps", "Tap rate (of sent)"])
    for t in taps:
        ws.append(
            [t["kind"], neutralise(t["id"]), neutralise(t["title"]), t["taps"], rate(t["rate"])]
        )


def summary_workbook(summary: ReportSummary) -> Any:
    """A write-only openpyxl workbook: the "Summary" sheet with its funnel chart, then an
    empty "Deliveries" sheet (returned as the workbook's second sheet). Its first cell
    style is the date format (``storage.reports.sql.XLSX_DATE_STYLE``, which the
    database's date cells name); rates are percentages."""
    from openpyxl import Workbook
    from openpyxl.cell import WriteOnlyCell
    from openpyxl.chart import BarChart, Reference

    wb = Workbook(write_only=True)
    ws = wb.create_sheet("Summary")
    date = WriteOnlyCell(ws)
    date.number_format = XLSX_DATE_FORMAT
    if date.style_id != report_sql.XLSX_DATE_STYLE:  # pragma: no cover - openpyxl changed
        raise RuntimeError(f"the XLSX date style is {date.style_id}, not the one the SQL names")

    def rate(value: float | None) -> Any:
        cell = WriteOnlyCell(ws, value)
        cell.number_format = XLSX_RATE_FORMAT
        return cell

    ws.append(["Campaign", neutralise(summary.name)])
    ws.append(["Campaign id", summary.campaign_id])
    ws.append(["State", summary.state])
    ws.append(["Recipients", summary.total])
    ws.append([])
    ws.append(["Stage", "Recipients"])  # row 6: the funnel the chart draws
    funnel_start = 7
    for label, value in (
        ("Sent", summary.sent),
        ("Delivered", summary.delivered),
        ("Read", summary.read),
        ("Failed", summary.failed),
    ):
        ws.append([label, value])
    ws.append([])
    ws.append(["Delivery rate (of sent)", rate(summary.delivery_rate)])
    ws.append(["Read rate (of sent)", rate(summary.read_rate)])
    ws.append(["Median seconds to delivery", summary.median_seconds_to_delivery])
    ws.append(["Median seconds to read", summary.median_seconds_to_read])
    ws.append(["Replied", summary.replied])
    ws.append(["Opted out", summary.opted_out])
    ws.append(["Times in", "UTC"])
    ws.append([])
    ws.append(["State", "Recipients"])
    for state, n in summary.counts.items():
        ws.append([state, n])
    _variant_rows(ws, summary.variants, rate)
    _tap_rows(ws, summary.taps, rate)
    _step_rows(ws, summary.steps)
    chart = BarChart()
    chart.type = "bar"  # horizontal bars, top to bottom: a funnel
    chart.title = "Funnel"
    chart.y_axis.title = "Recipients"
    chart.legend = None
    data = Reference(ws, min_col=2, min_row=funnel_start - 1, max_row=funnel_start + 3)
    labels = Reference(ws, min_col=1, min_row=funnel_start, max_row=funnel_start + 3)
    chart.add_data(data, titles_from_data=True)
    chart.set_categories(labels)
    chart.x_axis.scaling.orientation = "maxMin"  # Sent on top
    ws.add_chart(chart, "D2")
    wb.create_sheet(DELIVERIES_SHEET)
    return wb


__all__ = [
    "DELIVERIES_SHEET",
    "XLSX_RATE_FORMAT",
    "ReportError",
    "ReportSummary",
    "campaign_row",
    "campaign_taps",
    "read_summary",
    "report_summary",
    "summary_workbook",
    "tap_rates",
]
