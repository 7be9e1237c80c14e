"""The Grafana board of gatecast's metrics, and a picture of it drawn from a demo run.

``python -m bench.grafana board`` writes ``docs/grafana/gatecast.json`` (import it into
Grafana; its data source is a variable). ``python -m bench.grafana demo`` runs a demo
(a ``gatecast sandbox`` process, ``gatecast serve`` with its receiver process, three
campaigns and a few bad requests), scrapes the receiver's ``/metrics`` every
``--every`` seconds, and draws the board's panels from those scrapes into
``docs/screenshots/grafana-board.png`` with Chromium.

Grafana itself is not installed here, so the picture is not Grafana's: each panel's
PromQL is evaluated by :func:`evaluate` (the few forms the board uses: ``rate`` of a
counter over a window, ``sum by``, ``histogram_quantile`` over bucket rates, a gauge)
on the real scraped series, and drawn as a line chart with the panel's title and unit.
"""

from __future__ import annotations

import argparse
import html
import json
import re
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BOARD = ROOT / "docs" / "grafana" / "gatecast.json"
PICTURE = ROOT / "docs" / "screenshots" / "grafana-board.png"
DS = {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}


@dataclass(frozen=True)
class Panel:
    """One panel: its title, unit, queries (PromQL, legend) and width (of 24)."""

    title: str
    unit: str
    queries: tuple[tuple[str, str], ...]
    width: int = 8
    description: str = ""


W = "[5m]"
PANELS: tuple[Panel, ...] = (
    Panel(
        "Sends per second by outcome",
        "reqps",
        (("sum by (outcome) (rate(gatecast_send_attempts_total" + W + "))", "{{outcome}}"),),
        description="Every send attempt by the gateway's answer (worker processes).",
    ),
    Panel(
        "Gateway send latency",
        "s",
        (
            (
                "histogram_quantile(0.5, sum by (le) (rate(gatecast_gateway_send_seconds_bucket"
                + W
                + ")))",
                "p50",
            ),
            (
                "histogram_quantile(0.95, sum by (le) (rate(gatecast_gateway_send_seconds_bucket"
                + W
                + ")))",
                "p95",
            ),
        ),
    ),
    Panel(
        "Scheduler lag (claimed after due, p95)",
        "s",
        (
            (
                "histogram_quantile(0.95, sum by (le) "
                "(rate(gatecast_scheduler_claim_lateness_seconds_bucket" + W + ")))",
                "p95",
            ),
        ),
    ),
    Panel(
        "Deliveries by state",
        "short",
        (("sum by (state) (gatecast_deliveries)", "{{state}}"),),
    ),
    Panel(
        "Time to delivered and to read (p50)",
        "s",
        (
            (
                "histogram_quantile(0.5, sum by (le, status) "
                "(rate(gatecast_time_to_status_seconds_bucket" + W + ")))",
                "{{status}}",
            ),
        ),
    ),
    Panel(
        "Webhook lag (event time to applied, p95)",
        "s",
        (
            (
                "histogram_quantile(0.95, sum by (le, kind) "
                "(rate(gatecast_webhook_lag_seconds_bucket" + W + ")))",
                "{{kind}}",
            ),
        ),
    ),
    Panel(
        "HTTP requests per second by status",
        "reqps",
        (("sum by (status) (rate(gatecast_http_requests_total" + W + "))", "{{status}}"),),
    ),
    Panel(
        "Webhook events stored per second",
        "reqps",
        (("sum by (kind) (rate(gatecast_webhook_events_total" + W + "))", "{{kind}}"),),
    ),
    Panel(
        "Queue: waiting and due",
        "short",
        (("sum(gatecast_queue_depth)", "waiting"), ("sum(gatecast_queue_due)", "due")),
    ),
    Panel(
        "Sender connection state",
        "short",
        (("sum by (instance, state) (gatecast_instance_state)", "{{instance}} {{state}}"),),
    ),
    Panel(
        "Sends today per sender (daily cap count)",
        "short",
        (("sum by (instance) (gatecast_instance_sends_today)", "{{instance}}"),),
    ),
    Panel(
        "Campaigns by state",
        "short",
        (("sum by (state) (gatecast_campaigns)", "{{state}}"),),
    ),
    Panel(
        "Receiver memory and CPU",
        "short",
        (
            ("sum(process_resident_memory_bytes) / 1048576", "resident MiB"),
            ("sum(rate(process_cpu_seconds_total" + W + ")) * 100", "CPU %"),
        ),
    ),
    Panel(
        "Build",
        "short",
        (("sum by (version, schema) (gatecast_build_info)", "{{version}} schema {{schema}}"),),
    ),
)


def board() -> dict[str, Any]:
    """The Grafana dashboard (JSON model, schema 39) of :data:`PANELS`."""
    panels = []
    x = y = 0
    for i, p in enumerate(PANELS):
        if x + p.width > 24:
            x, y = 0, y + 8
        panels.append(
            {
                "id": i + 1,
                "type": "timeseries",
                "title": p.title,
                "description": p.description,
                "datasource": DS,
                "gridPos": {"h": 8, "w": p.width, "x": x, "y": y},
                "fieldConfig": {"defaults": {"unit": p.unit}, "overrides": []},
                "options": {"legend": {"displayMode": "list", "placement": "bottom"}},
                "targets": [
                    {"refId": chr(65 + j), "datasource": DS, "expr": q, "legendFormat": legend}
                    for j, (q, legend) in enumerate(p.queries)
                ],
            }
        )
        x += p.width
    return {
        "__inputs": [
            {
                "name": "DS_PROMETHEUS",
                "label": "Prometheus",
                "type": "datasource",
                "pluginId": "prometheus",
            }
        ],
        "title": "gatecast",
        "uid": "gatecast",
        "tags": ["gatecast"],
        "timezone": "browser",
        "schemaVersion": 39,
        "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"},
        "templating": {"list": []},
        "panels": panels,
    }


# --- evaluation of the board's PromQL on scraped samples ----------------------------

Labels = frozenset[tuple[str, str]]
Scrape = dict[tuple[str, Labels], float]
Series = dict[Labels, list[tuple[float, float]]]

_RATE = re.compile(r"^rate\((\w+)\[(\d+)m\]\)$")
_SUM = re.compile(r"^sum(?: by \(([\w, ]*)\))? ?\((.*)\)$")
_QUANTILE = re.compile(r"^histogram_quantile\(([\d.]+), (.*)\)$")
_ARITH = re.compile(r"^(.*) ([*/]) ([\d.]+)$")


def parse(text: str) -> Scrape:
    """A Prometheus text exposition as {(sample name, labels): value}."""
    from prometheus_client.parser import text_string_to_metric_families

    out: Scrape = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def evaluate(expr: str, scrapes: Sequence[tuple[float, Scrape]]) -> Series:
    """``expr`` (one of the board's forms) at each scrape: {labels: [(t, value)]}."""
    m = _ARITH.match(expr)
    if m:
        inner, op, number = m.group(1), m.group(2), float(m.group(3))
        apply: Callable[[float], float] = (
            (lambda v: v * number) if op == "*" else (lambda v: v / number)
        )
        return {k: [(t, apply(v)) for t, v in pts] for k, pts in evaluate(inner, scrapes).items()}
    m = _QUANTILE.match(expr)
    if m:
        return _quantile(float(m.group(1)), evaluate(m.group(2), scrapes))
    m = _SUM.match(expr)
    if m:
        keep = [k.strip() for k in (m.group(1) or "").split(",") if k.strip()]
        out: dict[Labels, dict[float, float]] = {}
        for labels, pts in evaluate(m.group(2), scrapes).items():
            key = frozenset((k, v) for k, v in labels if k in keep)
            for t, v in pts:
                out.setdefault(key, {}).setdefault(t, 0.0)
                out[key][t] += v
        return {k: sorted(v.items()) for k, v in out.items()}
    m = _RATE.match(expr)
    if m:
        return _rate(m.group(1), float(m.group(2)) * 60, scrapes)
    return _gauge(expr, scrapes)


def _gauge(name: str, scrapes: Sequence[tuple[float, Scrape]]) -> Series:
    out: Series = {}
    for t, scrape in scrapes:
        for (n, labels), v in scrape.items():
            if n == name:
                out.setdefault(labels, []).append((t, v))
    return out


def _rate(name: str, window: float, scrapes: Sequence[tuple[float, Scrape]]) -> Series:
    """Per-second increase over ``window`` (shorter at the start of the run), counter
    resets taken as a restart from 0, as Prometheus does."""
    raw = _gauge(name, scrapes)
    out: Series = {}
    for labels, pts in raw.items():
        rates = []
        for i, (t, _) in enumerate(pts):
            first = next(j for j in range(i + 1) if t - pts[j][0] <= window)
            if first == i:
                continue
            increase = 0.0
            for (_, a), (_, b) in zip(pts[first:i], pts[first + 1 : i + 1], strict=True):
                increase += b - a if b >= a else b
            rates.append((t, increase / (t - pts[first][0])))
        out[labels] = rates
    return out


def _quantile(q: float, buckets: Series) -> Series:
    """``histogram_quantile``: linear interpolation within the bucket holding rank q."""
    groups: dict[Labels, dict[float, list[tuple[float, float]]]] = {}
    for labels, pts in buckets.items():
        le = dict(labels).get("le")
        if le is None:
            continue
        key = frozenset((k, v) for k, v in labels if k != "le")
        for t, v in pts:
            groups.setdefault(key, {}).setdefault(t, []).append((float(le), v))
    out: Series = {}
    for key, by_t in groups.items():
        for t, bs in sorted(by_t.items()):
            bs.sort()
            total = bs[-1][1]
            if total <= 0:
                continue
            rank = q * total
            lower_bound, lower_count = 0.0, 0.0
            for bound, count in bs:
                if count >= rank:
                    if bound == float("inf"):
                        value = lower_bound
                    else:
                        span = count - lower_count
                        part = (rank - lower_count) / span if span else 1.0
                        value = lower_bound + (bound - lower_bound) * part
                    out.setdefault(key, []).append((t, value))
                    break
                lower_bound, lower_count = bound, count
    return out


# --- drawing ------------------------------------------------------------------------

_COLOURS = ("#73bf69", "#f2cc0c", "#5794f2", "#ff9830", "#f2495c", "#b877d9", "#8ab8ff")


def _legend(fmt: str, labels: Labels) -> str:
    values = dict(labels)
    return re.sub(r"\{\{(\w+)\}\}", lambda m: values.get(m.group(1), ""), fmt)


def _svg(series: list[tuple[str, list[tuple[float, float]]]], t0: float, t1: float) -> str:
    w, h, pad = 440, 170, 36
    top = max((v for _, pts in series for _, v in pts), default=0.0) or 1.0
    top *= 1.1
    parts = [f'<svg width="{w}" height="{h}" xmlns="http://www.w3.org/2000/svg">']
    for i in range(5):
        y = pad / 2 + (h - pad) * i / 4
        value = top * (1 - i / 4)
        parts.append(f'<line x1="{pad}" x2="{w}" y1="{y:.1f}" y2="{y:.1f}" stroke="#2c3235"/>')
        parts.append(
            f'<text x="{pad - 4}" y="{y + 4:.1f}" fill="#8e8e8e" font-size="10" '
            f'text-anchor="end">{value:.3g}</text>'
        )
    span = max(t1 - t0, 1.0)
    for i in range(5):
        x = pad + (w - pad - 4) * i / 4
        anchor = "end" if i == 4 else "middle"
        parts.append(
            f'<text x="{x:.1f}" y="{h - 2}" fill="#8e8e8e" font-size="10" '
            f'text-anchor="{anchor}">+{span * i / 4:.0f}s</text>'
        )
    for i, (_, pts) in enumerate(series):
        xy = " ".join(
            f"{pad + (w - pad - 4) * (t - t0) / span:.1f},{pad / 2 + (h - pad) * (1 - v / top):.1f}"
            for t, v in pts
        )
        colour = _COLOURS[i % len(_COLOURS)]
        parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{xy}"/>')
    parts.append("</svg>")
    return "".join(parts)


def render_html(scrapes: Sequence[tuple[float, Scrape]], note: str) -> str:
    """The board's panels drawn from ``scrapes`` as one HTML page."""
    t0, t1 = scrapes[0][0], scrapes[-1][0]
    cards = []
    for p in PANELS:
        lines: list[tuple[str, list[tuple[float, float]]]] = []
        for expr, legend in p.queries:
            for labels, pts in sorted(
                evaluate(expr, scrapes).items(), key=lambda kv: sorted(kv[0])
            ):
                if pts:
                    lines.append((_legend(legend, labels), pts))
        keys = "".join(
            f'<span><i style="background:{_COLOURS[i % len(_COLOURS)]}"></i>'
            f"{html.escape(name)}</span>"
            for i, (name, _) in enumerate(lines[:8])
        )
        cards.append(
            f'<div class="panel"><h3>{html.escape(p.title)} <small>{p.unit}</small></h3>'
            f'{_svg(lines[:8], t0, t1)}<div class="keys">{keys}</div></div>'
        )
    style = (
        "body{background:#111217;color:#ccccdc;font-family:Inter,Helvetica,Arial,sans-serif;"
        "margin:12px}h1{font-size:18px;margin:4px 0}p{font-size:12px;color:#8e8e8e;margin:"
        "2px 0 10px}.grid{display:grid;grid-template-columns:repeat(3,460px);gap:8px}"
        ".panel{background:#181b1f;border:1px solid #2c3235;border-radius:3px;padding:6px 8px}"
        "h3{font-size:13px;margin:0 0 4px;font-weight:500}small{color:#8e8e8e}"
        ".keys{font-size:11px;display:flex;flex-wrap:wrap;gap:4px 10px}"
        ".keys i{display:inline-block;width:10px;height:3px;margin-right:4px;"
        "vertical-align:middle}"
    )
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><style>{style}</style></head>"
        f"<body><h1>gatecast</h1><p>{html.escape(note)}</p>"
        f"<div class='grid'>{''.join(cards)}</div></body></html>"
    )


def screenshot(page_html: str, out: Path) -> None:
    """``page_html`` rendered by Chromium (/usr/bin/chromium) into the PNG ``out``."""
    from playwright.sync_api import sync_playwright

    out.parent.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium")
        page = browser.new_page(viewport={"width": 1420, "height": 900})
        page.set_content(page_html)
        page.screenshot(path=str(out), full_page=True)
        browser.close()


# --- the demo run -------------------------------------------------------------------


def demo(seconds: float, every: float, out: Path) -> list[tuple[float, Scrape]]:
    """Run the demo and scrape ``/metrics`` every ``every`` s for about ``seconds`` s."""
    sys.path.insert(0, str(ROOT))
    from tests.journeys.harness import (
        SAMPLES,
        import_over_api,
        link_sender_over_api,
        start_sandbox,
        workspace,
    )

    scrapes: list[tuple[float, Scrape]] = []
    with tempfile.TemporaryDirectory() as tmp:
        gateway = start_sandbox(
            Path(tmp) / "gw", "--status-delays", "0.5,3,8", "--not-on-app", "12125550115"
        )
        try:
            with workspace(Path(tmp) / "work", gateway.url) as ws:
                api = ws.serve().api()
                senders = [link_sender_over_api(api, f"phone {i}") for i in (1, 2)]
                import_over_api(api, SAMPLES / "contacts.csv", "customers")
                started = time.monotonic()
                plan = [
                    (0.0, "text", 30),
                    (seconds / 3, "interactive", 60),
                    (seconds / 2, "text", 90),
                ]
                for t, v in _run(api, senders, plan, seconds, every, started):
                    scrapes.append((t, v))
        finally:
            gateway.stop()
    out.write_text(
        json.dumps([[t, [[n, sorted(ls), v] for (n, ls), v in s.items()]] for t, s in scrapes])
    )
    return scrapes


def _run(
    api: Any,
    senders: list[str],
    plan: list[tuple[float, str, int]],
    seconds: float,
    every: float,
    started: float,
) -> list[tuple[float, Scrape]]:
    messages = {
        "text": {"type": "text", "text": "Hi {{ name }}, our offer is live."},
        "interactive": {
            "type": "interactive",
            "text": "Hi {{ name }}, coming on Friday?",
            "buttons": [{"display_text": "Yes", "id": "yes"}, {"display_text": "No", "id": "no"}],
        },
    }
    out: list[tuple[float, Scrape]] = []
    pending = list(plan)
    while time.monotonic() - started < seconds:
        now = time.monotonic() - started
        while pending and pending[0][0] <= now:
            _, kind, per_minute = pending.pop(0)
            api.post(
                "/api/v1/campaigns",
                json={
                    "name": f"{kind} at {per_minute}/min",
                    "list": "customers",
                    "instances": senders,
                    "message": messages[kind],
                    "pace": {"per_minute": per_minute, "delay_seconds": [0.2, 1.0]},
                },
            ).raise_for_status()
        api.get("/api/v1/campaigns/987654")  # an operator's typo: a 404
        api.post("/api/v1/lists", json={"name": ""})  # a form sent empty: a 422
        out.append((now, parse(api.get("/metrics").text)))
        time.sleep(every)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """``board``, or ``demo``: see the module's docstring."""
    parser = argparse.ArgumentParser(prog="python -m bench.grafana")
    sub = parser.add_subparsers(dest="what", required=True)
    sub.add_parser("board", help="write docs/grafana/gatecast.json")
    run = sub.add_parser("demo", help="run a demo, scrape it, draw the board")
    run.add_argument("--seconds", type=float, default=150)
    run.add_argument("--every", type=float, default=3)
    run.add_argument("--scrapes", type=Path, default=Path(tempfile.gettempdir()) / "scrapes.json")
    args = parser.parse_args(argv)
    BOARD.parent.mkdir(parents=True, exist_ok=True)
    BOARD.write_text(json.dumps(board(), indent=2) + "\n")
    if args.what == "demo":
        scrapes = demo(args.seconds, args.every, args.scrapes)
        note = (
            f"Not Grafana: the panels of docs/grafana/gatecast.json evaluated by bench/grafana.py "
            f"on {len(scrapes)} real scrapes of a demo run's /metrics (gatecast serve: a worker "
            f"and its receiver process; the sandbox gateway; 2 senders, 3 campaigns), "
            f"one every {args.every:g} s over {scrapes[-1][0]:.0f} s; rates over 5 min windows "
            "(shorter at the start)."
        )
        screenshot(render_html(scrapes, note), PICTURE)
        print(f"wrote {BOARD} and {PICTURE}")
    else:
        print(f"wrote {BOARD}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
