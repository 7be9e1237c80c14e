"""``gatecast sandbox``: run the local gateway emulator until interrupted."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path
from typing import Annotated, Literal

import typer
from rich.console import Console


def _latency(value: str) -> tuple[int, int]:
    try:
        lo, _, hi = value.partition("-")
        low = int(lo)
        return (low, int(hi) if hi else low)
    except ValueError:
        raise typer.BadParameter(
            f"expected A-B in milliseconds (e.g. 5-50), got {value!r}"
        ) from None


def _numbers(value: str) -> frozenset[str]:
    numbers = frozenset(n.strip().lstrip("+") for n in value.split(",") if n.strip())
    bad = sorted(n for n in numbers if not n.isdigit())
    if bad:
        raise typer.BadParameter(f"not digits: {', '.join(bad[:5])}")
    return numbers


def _delays(value: str) -> tuple[float, float, float]:
    parts = value.split(",")
    try:
        sent, delivered, read = (float(p) for p in parts)
    except ValueError:
        raise typer.BadParameter(
            f"expected three seconds SENT,DELIVERED,READ (e.g. 0.05,0.2,0.5), got {value!r}"
        ) from None
    return (sent, delivered, read)


def _seconds_range(value: str) -> tuple[float, float] | None:
    if not value.strip():
        return None
    try:
        lo, _, hi = value.partition("-")
        low = float(lo)
        return (low, float(hi) if hi else low)
    except ValueError:
        raise typer.BadParameter(f"expected A-B in seconds (e.g. 1-30), got {value!r}") from None


def _keywords(value: str) -> tuple[str, ...]:
    return tuple(k.strip() for k in value.split(",") if k.strip())


def sandbox(
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port (0 picks a free one).")] = 8900,
    dialect: Annotated[
        str,
        typer.Option(
            help="spec (POST instance routes, spec events), reference, evolution "
            "(the routes, apikey header and events of Evolution API v2) or waha (WAHA's "
            "routes, X-Api-Key header and events)."
        ),
    ] = "spec",
    seed: Annotated[int, typer.Option(help="Seed of every random choice.")] = 0,
    fault_rate: Annotated[float, typer.Option(help="Share of sends answered 5xx.")] = 0.0,
    rate_429: Annotated[float, typer.Option(help="Share of sends answered 429.")] = 0.0,
    drop_rate: Annotated[
        float, typer.Option(help="Share of sends accepted, then closed without a response.")
    ] = 0.0,
    slow_rate: Annotated[
        float, typer.Option(help="Share of sends accepted, answered after --slow-seconds.")
    ] = 0.0,
    slow_seconds: Annotated[float, typer.Option(help="Delay of slow answers.")] = 35.0,
    latency_ms: Annotated[str, typer.Option(help="Added latency per request, A-B ms.")] = "0-0",
    webhook_latency_ms: Annotated[
        str, typer.Option(help="Latency added to webhook registrations alone, A-B ms.")
    ] = "0-0",
    not_on_app: Annotated[
        str, typer.Option(help="Comma-separated numbers that are not on the app.")
    ] = "",
    not_on_app_rate: Annotated[float, typer.Option(help="Share of numbers not on the app.")] = 0.0,
    error_463_rate: Annotated[
        float, typer.Option(help="Share of messages failing with code 463 (ban signal).")
    ] = 0.0,
    cold_lock_after: Annotated[
        int | None,
        typer.Option(
            help="Timelock mode: after this many cold contacts, the next one starts a 463 "
            "timelock (messages to cold contacts fail with 463; known chats and groups pass)."
        ),
    ] = None,
    cold_lock_seconds: Annotated[
        float, typer.Option(help="How long the timelock of --cold-lock-after lasts.")
    ] = 60.0,
    reply_rate: Annotated[
        float,
        typer.Option(
            help="Share of recipients who reply a short text (to a message with buttons or "
            "rows: a random one of them)."
        ),
    ] = 0.0,
    stop_rate: Annotated[float, typer.Option(help="Share of recipients who reply STOP.")] = 0.0,
    tap_rate: Annotated[
        float,
        typer.Option(
            help="Share of recipients of a message with buttons or list rows who tap one "
            "(the same choice per recipient for a given --seed)."
        ),
    ] = 0.0,
    keyword_rate: Annotated[
        float, typer.Option(help="Share of recipients who reply one of --keywords.")
    ] = 0.0,
    keywords: Annotated[
        str, typer.Option(help="Comma-separated keywords for --keyword-rate (STOP opts out).")
    ] = "YES,INFO,STOP",
    reply_delay: Annotated[
        str,
        typer.Option(
            help="Seconds from reading a message to answering it, A-B (empty: about the "
            "first of --status-delays)."
        ),
    ] = "",
    quote_rate: Annotated[
        float, typer.Option(help="Share of text replies that quote the message they answer.")
    ] = 0.0,
    read_rate: Annotated[float, typer.Option(help="Share of delivered messages read.")] = 1.0,
    status_delays: Annotated[
        str, typer.Option(help="Seconds to the sent, delivered and read events.")
    ] = "0.05,0.2,0.5",
    duplicate_rate: Annotated[float, typer.Option(help="Share of events sent twice.")] = 0.0,
    reorder: Annotated[bool, typer.Option(help="Shuffle the order of a message's events.")] = False,
    presence: Annotated[bool, typer.Option(help="Emit presence events.")] = False,
    monthly_quota: Annotated[
        int | None, typer.Option(help="Sends per instance before the quota trap.")
    ] = None,
    no_key_rate: Annotated[
        float, typer.Option(help='Share of sends answered {"status":"success"} without a key.')
    ] = 0.0,
    backend_down_rate: Annotated[
        float, typer.Option(help="Share of sends answered [], empty or non-JSON.")
    ] = 0.0,
    id_under_data: Annotated[
        bool, typer.Option(help="Answer sends with the key at data.key.id (some hosts).")
    ] = False,
    number_from_json: Annotated[
        bool, typer.Option(help="Read number from JSON bodies (reference builds vary).")
    ] = True,
    max_instances: Annotated[int, typer.Option(help="Instances per access token.")] = 100,
    disconnect_after: Annotated[
        int | None,
        typer.Option(help="Drop an instance's connection after this many sends (reconnect heals)."),
    ] = None,
    auto_link: Annotated[bool, typer.Option(help="Link new instances at once (demo).")] = False,
    connection_events: Annotated[
        bool,
        typer.Option(
            help="Post connection events (--no-connection-events: never, like gateways "
            "that post none)."
        ),
    ] = True,
    strict: Annotated[
        bool,
        typer.Option(
            "--strict",
            help="Follow the gateway spec to the letter: no connection events, and a QR "
            "request of a linked instance answers a QR code, not 'already logged in'.",
        ),
    ] = False,
    reset_without_id: Annotated[
        bool,
        typer.Option(
            "--reset-without-id", help="Answer reset_instance without the new id (some gateways)."
        ),
    ] = False,
    token: Annotated[
        list[str] | None, typer.Option(help="Accepted access token (repeatable).")
    ] = None,
    ready_file: Annotated[
        Path | None, typer.Option(help="Write the URL here once listening.")
    ] = None,
) -> None:
    """Run the local gateway emulator (both bases /api and /messenger_api) until Ctrl-C."""
    from gateway.sandbox import SandboxConfig, run_sandbox_in_thread

    dialects: dict[str, Literal["spec", "reference", "evolution", "waha"]] = {
        "spec": "spec",
        "reference": "reference",
        "evolution": "evolution",
        "waha": "waha",
    }
    if dialect not in dialects:
        raise typer.BadParameter(
            "must be spec or reference (or evolution, waha)", param_hint="--dialect"
        )
    chosen = dialects[dialect]
    try:
        cfg = SandboxConfig(
            dialect=chosen,
            seed=seed,
            access_tokens=tuple(token) if token else ("sandbox-token",),
            auto_link=auto_link,
            fault_rate_5xx=fault_rate,
            fault_rate_429=rate_429,
            drop_rate=drop_rate,
            slow_rate=slow_rate,
            slow_seconds=slow_seconds,
            latency_ms=_latency(latency_ms),
            webhook_latency_ms=_latency(webhook_latency_ms),
            not_on_app=_numbers(not_on_app),
            not_on_app_rate=not_on_app_rate,
            reply_rate=reply_rate,
            stop_rate=stop_rate,
            tap_rate=tap_rate,
            keyword_rate=keyword_rate,
            keywords=_keywords(keywords),
            reply_delay_seconds=_seconds_range(reply_delay),
            quote_rate=quote_rate,
            read_rate=read_rate,
            status_delays=_delays(status_delays),
            duplicate_event_rate=duplicate_rate,
            reorder_events=reorder,
            presence_events=presence,
            monthly_quota=monthly_quota,
            no_key_rate=no_key_rate,
            backend_down_rate=backend_down_rate,
            error_463_rate=error_463_rate,
            cold_lock_after=cold_lock_after,
            cold_lock_seconds=cold_lock_seconds,
            id_under_data=id_under_data,
            number_from_json=number_from_json,
            max_instances_per_token=max_instances,
            disconnect_after_sends=disconnect_after,
            connection_events=connection_events,
            strict=strict,
            reset_returns_id=not reset_without_id,
        )
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    console = Console(stderr=True)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    with run_sandbox_in_thread(cfg, host=host, port=port) as sb:
        if ready_file is not None:
            tmp = ready_file.with_name(ready_file.name + ".tmp")
            tmp.write_text(sb.url + "\n", encoding="utf-8")
            os.replace(tmp, ready_file)
        console.print(
            f"[green]sandbox[/] ({cfg.dialect} dialect, seed {cfg.seed}) listening on "
            f"[bold]{sb.url}[/] ({_routes(cfg.dialect)}; inspect {sb.url}/sandbox/stats)"
        )
        if not token:
            console.print("access token: the built-in default (docs/sandbox.md; --token to set)")
        while not stop.wait(0.5):
            pass
    console.print("sandbox stopped")


def register(app: typer.Typer) -> None:
    """Add ``gatecast sandbox`` to the root app."""
    app.command("sandbox")(sandbox)


def _routes(dialect: str) -> str:
    """Where the sandbox's gateway routes are, in the startup line."""
    if dialect == "evolution":
        return "Evolution API routes at the root, key in the apikey header"
    if dialect == "waha":
        return "WAHA routes under /api, key in the X-Api-Key header"
    return "bases /api and /messenger_api"
