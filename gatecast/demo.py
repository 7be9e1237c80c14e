"""``gatecast demo``: the whole product in one process, against an embedded sandbox.

sandbox on a free port -> webhook/app server on a free port -> link an instance (create,
QR, scan) -> register the webhook -> import ``samples/contacts.csv`` into "customers" ->
create ``samples/campaign.toml`` at a demo pace -> run it with live progress -> wait
for the statuses -> summary table -> ``reports/<campaign>.csv`` and ``.xlsx``.
"""

from __future__ import annotations

import base64
import contextlib
import re
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import SecretStr
from rich.console import Console
from rich.table import Table
from sqlalchemy.engine import Engine

from campaigns.campaign_file import PaceSpec, load_campaign_file
from campaigns.importer import ImportOptions, import_file
from campaigns.instances import WarmupChange, mark_connected, mark_gone, set_warmup
from campaigns.replies import replies_page
from campaigns.reports import write_report
from campaigns.reports.summary import campaign_taps
from campaigns.service import create_campaign, reply_stats
from gatecast.runtime import embedded_sandbox, open_engine
from gatecast.runtime.foreground import RunOptions, run_campaign, settle
from gatecast.runtime.http_server import AsgiServer
from gatecast.runtime.webhooks import (
    register_webhooks,
    shown_webhook_url,
    webhook_url,
    with_webhook_secret,
)
from gatecast.settings import Settings
from gatecast.web.app import create_app
from gatecast.web.auth import ensure_api_key, sign_in_hint
from gatecast.web.context import AppContext
from gatecast.web.webhook import install_log_redaction
from gateway.client import GatewayClient
from scheduler.service import Service, ServiceOptions
from scheduler.starts import start_campaign
from storage.engine import describe_url
from storage.types import utcnow

SAMPLES = Path(__file__).resolve().parent.parent / "samples"

#: why the demo's instance is gone once the demo ends
DEMO_INSTANCE_GONE = "gone: it lived in the demo's embedded sandbox, which stopped"

#: numbers of samples/contacts.csv the demo sandbox treats as "not on the app" (digits)
NOT_ON_APP = frozenset({"14155550178", "13125550190"})


@dataclass(frozen=True)
class DemoOptions:
    """What the demo uses; the defaults are what ``make demo`` runs."""

    database_url: str | None = None
    contacts: Path = SAMPLES / "contacts.csv"
    campaign: Path = SAMPLES / "campaign.toml"
    reports_dir: Path | None = None
    per_minute: float = 600.0
    delay_seconds: tuple[float, float] = (0.05, 0.2)
    seed: int | None = None  # None: a fresh seed per run (message ids must not repeat)
    settle_seconds: float = 20.0
    keep_serving: bool = False
    gateway: Literal["spec", "evolution", "waha"] = "spec"  # the sandbox's dialect, gatecast's kind


def slugify(name: str) -> str:
    """``November promo`` -> ``november-promo`` (file-name safe)."""
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    return slug or "campaign"


def _save_qr(data_uri: str | None, path: Path) -> Path | None:
    if not data_uri or "," not in data_uri:
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(base64.b64decode(data_uri.split(",", 1)[1]))
    return path


def _summary_table(counts: dict[str, int], title: str) -> Table:
    table = Table(title=title)
    table.add_column("state")
    table.add_column("recipients", justify="right")
    for state, n in counts.items():
        if n:
            table.add_row(state, str(n))
    table.add_row("[bold]total[/]", f"[bold]{sum(counts.values())}[/]")
    return table


def _answers_line(engine: Engine, campaign_id: int) -> str:
    """What people answered, as gatecast recorded it: taps per button or row, and the
    replies by text (the most frequent first)."""
    taps = [f"{t['title']} {t['taps']}" for t in campaign_taps(engine, campaign_id) if t["taps"]]
    texts = Counter(
        r.text.strip()
        for r in replies_page(engine, campaign_id=campaign_id, limit=1000).items
        if not (r.button_id or r.row_id)
    )
    said = ", ".join(f"{text} {n}" for text, n in texts.most_common(6)) or "none"
    return f"taps: {', '.join(taps) or 'none'}; replies by text: {said}"


def run_demo(settings: Settings, options: DemoOptions, console: Console) -> int:
    """Run the demo end to end; returns the exit code."""
    started = time.monotonic()
    if options.database_url:
        settings = settings.model_copy(update={"database_url": options.database_url})
    reports_dir = options.reports_dir or Path(settings.reports_dir)
    with contextlib.ExitStack() as stack:
        seed = options.seed if options.seed is not None else time.time_ns() % 2**31
        sb = stack.enter_context(
            embedded_sandbox(
                seed=seed,
                auto_link=False,
                dialect=options.gateway,
                status_delays=(0.05, 0.3, 0.8),
                not_on_app=NOT_ON_APP,
                # simulated people (docs/sandbox.md): a few reply, tap a button (when the
                # message has some) or answer a keyword, a few send STOP
                reply_rate=0.08,
                stop_rate=0.06,
                tap_rate=0.2,
                keyword_rate=0.1,
                keywords=("YES", "INFO"),
                read_rate=0.7,
            )
        )
        console.rule("[bold]gatecast demo")
        console.print(f"sandbox gateway at {sb.url} ({options.gateway} dialect)")
        settings = settings.model_copy(
            # the embedded sandbox posts to this process: no public address applies
            update={
                "gateway_url": sb.url,
                "gateway_kind": options.gateway,
                "access_token": SecretStr(sb.access_token),
                "public_url": "",
            }
        )
        settings, _ = with_webhook_secret(settings)
        engine = open_engine(settings, auto_upgrade=True)
        console.print(f"database {describe_url(settings.database_url)}")

        def client() -> GatewayClient:
            return GatewayClient(
                sb.url,
                sb.access_token,
                prefix=settings.gateway_prefix,
                timeout=10.0,
                kind=settings.gateway_kind,
            )

        install_log_redaction()
        api_key = ensure_api_key(settings)
        ctx = AppContext(
            settings=settings, engine=engine, gateway_factory=client, api_key=api_key.value
        )
        server = stack.enter_context(
            AsgiServer(create_app(ctx), host="127.0.0.1", port=0, log_level="error")
        )
        console.print(f"webhook receiver, API and dashboard at {server.url}")
        # the key itself only on the terminal of whoever started it (never into a log)
        hint = sign_in_hint(api_key, server.url, show_key=console.is_terminal)
        if options.keep_serving:
            console.print(hint, highlight=False, soft_wrap=True)
        demo_webhook = webhook_url(settings, server.url)

        # link an instance: create, QR, scan
        with client() as gw:
            iid = gw.create_instance()
            qr = gw.get_qrcode(iid)
            qr_path = _save_qr(qr.data_uri, reports_dir / "demo-qr.png")
            sb.scan(iid)
            console.print(
                f"instance [bold]{iid}[/] created; QR code "
                f"{'saved to ' + str(qr_path) if qr_path else 'sent through the webhook'}; "
                "scanned (sandbox)"
            )
            mark_connected(engine, iid, now=utcnow())
            # the embedded sandbox is a gateway we own: its number needs no warm-up
            set_warmup(engine, iid, WarmupChange(off=True), now=utcnow())
            register_webhooks(engine, gw, demo_webhook, [iid], out=console)
        # the embedded sandbox (and the instance in it) ends with the demo: record that, so
        # later campaigns never pick it or wait for it
        stack.callback(lambda: mark_gone(engine, iid, DEMO_INSTANCE_GONE, now=utcnow()))

        # import the contacts
        report = import_file(engine, options.contacts, ImportOptions(list_name="customers"))
        console.print(
            f"imported {options.contacts.name} into list '{report.list_name}': "
            f"{report.rows_read} rows, {report.imported} new, {report.updated} updated, "
            f"{report.duplicates} duplicates, {report.invalid} invalid"
        )
        if report.rejects:
            rej = Table(title="rejected rows")
            rej.add_column("row", justify="right")
            rej.add_column("column")
            rej.add_column("reason")
            for r in report.rejects:
                rej.add_row(str(r.row_number), r.column or "", r.reason)
            console.print(rej)

        # create the campaign at a demo pace, and run it
        spec = load_campaign_file(options.campaign)
        lo, hi = options.delay_seconds
        spec = spec.model_copy(
            update={
                "pace": PaceSpec(
                    per_minute=options.per_minute, delay_seconds=(lo, hi), daily_cap=None
                ),
                "instances": [iid],
            }
        )
        created = create_campaign(engine, spec, gateway_kind=settings.gateway_kind)
        console.print(
            f"campaign {created.id} '{spec.name}' created: {created.recipients} recipients, "
            f"pace {options.per_minute:g}/min with {lo:g}-{hi:g} s gaps (demo pace)"
        )
        for item in created.preview[:3]:
            console.print(f"  preview → {item.target}: {item.content.get('text', '')}")
        start_campaign(engine, created.id, now=utcnow(), enforce_grace=False)
        counts = run_campaign(
            engine, created.id, client, options=RunOptions(workers=2), console=console
        )
        console.print("waiting for delivery statuses and replies…")
        deadline = time.monotonic() + options.settle_seconds
        sb.wait_idle(options.settle_seconds)  # the sandbox has posted every event
        counts = settle(
            engine, created.id, max(0.0, deadline - time.monotonic()), quiet_seconds=1.0
        )
        replies, opted_out = reply_stats(engine, created.id)
        console.print(_summary_table(counts, f"campaign {created.id}: {spec.name}"))
        console.print(f"replies: {replies}; contacts who opted out (STOP): {opted_out}")
        console.print(_answers_line(engine, created.id))
        slug = slugify(spec.name)
        written = [
            write_report(engine, created.id, reports_dir / f"{slug}.{ext}")
            for ext in ("csv", "xlsx")
        ]
        for path in written:
            console.print(f"report written: {path}")
        console.print(f"demo finished in {time.monotonic() - started:.1f} s")

        if options.keep_serving:
            service = stack.enter_context(
                Service(engine, client, options=ServiceOptions(workers=2), instance_client=client)
            )
            console.print(
                f"serving on {server.url} (webhook "
                f"{shown_webhook_url(demo_webhook)}); Ctrl-C to stop"
            )
            console.print(hint, highlight=False, soft_wrap=True)
            stop = threading.Event()
            try:
                while not stop.wait(1.0):
                    pass
            except KeyboardInterrupt:
                pass
            del service
    return 0
