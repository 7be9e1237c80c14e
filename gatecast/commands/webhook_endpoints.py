"""``gatecast webhook-endpoints``: outbound webhooks to other systems (add, list, show,
update, rotate-secret, test, remove, the delivery attempts, replay)."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Annotated, NoReturn, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from gatecast.commands.common import fail, id_argument, open_engine_or_fail

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from campaigns.webhook_endpoints import Endpoint

T = TypeVar("T")

console = Console()
endpoints_app = typer.Typer(
    help="Outbound webhooks: tell other systems what happened (signed, Standard Webhooks).",
    no_args_is_help=True,
)


def _unknown(endpoint_id: int) -> NoReturn:
    fail(f"no webhook endpoint {endpoint_id} (gatecast webhook-endpoints list)")


def _state(e: Endpoint) -> str:
    if not e.enabled:
        return f"disabled: {e.disabled_reason or 'by hand'}"
    if e.consecutive_failures:
        return f"failing ({e.consecutive_failures} in a row)"
    return "enabled"


_EVENTS_HELP = (
    "an event (repeatable, or comma-separated): delivery.sent, delivery.delivered, "
    "delivery.read, delivery.failed, delivery.skipped, delivery.unknown, reply.received, "
    "contact.opted_out, contact.opted_in, campaign.state_changed, campaign.held, "
    "instance.state_changed, instance.connected, instance.disconnected, sender.paused, "
    "sender.resumed, sender.health_changed, import.finished; '*' for all"
)


def _names(events: list[str]) -> list[str]:
    return [n for given in events for n in given.split(",")]


def _refusing(call: Callable[[Engine], T]) -> T:
    """``call(engine)`` on the database; an :class:`EndpointError` ends the command with
    its message."""
    from campaigns.webhook_endpoints import EndpointError

    engine = open_engine_or_fail()
    try:
        return call(engine)
    except EndpointError as exc:
        fail(str(exc))
    finally:
        engine.dispose()


@endpoints_app.command("add")
def add_cmd(
    url: Annotated[str, typer.Argument(help="the http:// or https:// address that receives them")],
    events: Annotated[
        list[str] | None,
        typer.Option("--events", "-e", help=_EVENTS_HELP + " (the default)"),
    ] = None,
    description: Annotated[str, typer.Option("--description", help="a note for you")] = "",
    as_json: Annotated[bool, typer.Option("--json", help="print as JSON")] = False,
) -> None:
    """Register an endpoint and print its signing secret (shown this once: keep it)."""
    from campaigns.webhook_endpoints import EndpointError, create_endpoint

    names = _names(events or ["*"])
    engine = open_engine_or_fail(create=True)
    try:
        created = create_endpoint(engine, url, names, description=description)
    except EndpointError as exc:
        fail(str(exc))
    finally:
        engine.dispose()
    if as_json:
        print(json.dumps({**created.endpoint.to_dict(), "secret": created.secret}))
        return
    e = created.endpoint
    console.print(f"webhook endpoint {e.id}: {escape(e.url)} ({', '.join(e.events)})")
    console.print(f"signing secret (shown once, keep it): {created.secret}", highlight=False)


@endpoints_app.command("list")
def list_cmd(
    as_json: Annotated[bool, typer.Option("--json", help="print as JSON")] = False,
) -> None:
    """The endpoints, oldest first."""
    from campaigns.webhook_endpoints import endpoints_page

    engine = open_engine_or_fail()
    try:
        page = endpoints_page(engine, limit=10_000)
    finally:
        engine.dispose()
    if as_json:
        print(json.dumps([e.to_dict() for e in page.items]))
        return
    if not page.items:
        console.print("no webhook endpoints yet: gatecast webhook-endpoints add URL --events ...")
        return
    table = Table(title="Webhook endpoints")
    for column in ("id", "url", "events", "state"):
        table.add_column(column, overflow="fold")
    for e in page.items:
        table.add_row(str(e.id), escape(e.url), ", ".join(e.events), escape(_state(e)))
    console.print(table)


@endpoints_app.command("show")
def show_cmd(
    endpoint_id: Annotated[int, id_argument("the endpoint's id")],
    as_json: Annotated[bool, typer.Option("--json", help="print as JSON")] = False,
) -> None:
    """One endpoint with its messages by state."""
    from campaigns.webhook_endpoints import get_endpoint

    engine = open_engine_or_fail()
    try:
        e = get_endpoint(engine, endpoint_id)
    finally:
        engine.dispose()
    if e is None:
        _unknown(endpoint_id)
    if as_json:
        print(json.dumps(e.to_dict()))
        return
    console.print(f"webhook endpoint {e.id}: {escape(e.url)}")
    console.print(f"events: {', '.join(e.events)}")
    console.print(f"state: {escape(_state(e))}")
    if e.old_secret_valid_until is not None and e.old_secret_valid_until > datetime.now(UTC):
        until = e.old_secret_valid_until.strftime("%Y-%m-%d %H:%M:%S UTC")
        console.print(f"previous secret also signs until: {until}")
    m = e.messages or {}
    console.print(
        f"messages: {m.get('delivered', 0)} delivered, {m.get('pending', 0)} waiting, "
        f"{m.get('failed', 0)} failed"
    )


@endpoints_app.command("update")
def update_cmd(
    endpoint_id: Annotated[int, id_argument("the endpoint's id")],
    url: Annotated[str | None, typer.Option("--url", help="a new address")] = None,
    events: Annotated[
        list[str] | None,
        typer.Option("--events", "-e", help=_EVENTS_HELP + " (replaces the list)"),
    ] = None,
    description: Annotated[str | None, typer.Option("--description", help="a new note")] = None,
    enabled: Annotated[
        bool | None,
        typer.Option(
            "--enable/--disable",
            help="turn it on (its waiting messages are sent) or off (no events written)",
        ),
    ] = None,
) -> None:
    """Change an endpoint's address, events, note, or turn it on or off."""
    from campaigns.webhook_endpoints import update_endpoint

    if url is None and events is None and description is None and enabled is None:
        fail("nothing to change: give --url, --events, --description, --enable or --disable")
    changed = _refusing(
        lambda engine: update_endpoint(
            engine,
            endpoint_id,
            url=url,
            events=_names(events) if events is not None else None,
            description=description,
            enabled=enabled,
        )
    )
    if changed is None:
        _unknown(endpoint_id)
    console.print(
        f"webhook endpoint {changed.id}: {escape(changed.url)} ({', '.join(changed.events)}); "
        f"{escape(_state(changed))}"
    )


@endpoints_app.command("rotate-secret")
def rotate_cmd(
    endpoint_id: Annotated[int, id_argument("the endpoint's id")],
    overlap_hours: Annotated[
        float,
        typer.Option(
            "--overlap-hours",
            min=0,
            max=168,
            help="how long the current secret still signs beside the new one",
        ),
    ] = 24.0,
) -> None:
    """A new signing secret, printed this once; the current one still signs for the
    overlap (both signatures are sent), then only the new one does."""
    from campaigns.webhook_endpoints import rotate_secret

    rotated = _refusing(
        lambda engine: rotate_secret(engine, endpoint_id, overlap=timedelta(hours=overlap_hours))
    )
    if rotated is None:
        _unknown(endpoint_id)
    until = rotated.endpoint.old_secret_valid_until
    assert until is not None
    console.print(f"new signing secret (shown once, keep it): {rotated.secret}", highlight=False)
    console.print(f"the previous secret also signs until {until.strftime('%Y-%m-%d %H:%M:%S UTC')}")


@endpoints_app.command("test")
def test_cmd(endpoint_id: Annotated[int, id_argument("the endpoint's id")]) -> None:
    """Send a webhook.test event, signed and retried like every event (its attempts
    show how it went)."""
    from campaigns.webhook_endpoints import EndpointDisabled, send_test_event

    engine = open_engine_or_fail()
    try:
        webhook_id = send_test_event(engine, endpoint_id)
    except EndpointDisabled as exc:
        fail(f"{exc}: gatecast webhook-endpoints update {endpoint_id} --enable")
    finally:
        engine.dispose()
    if webhook_id is None:
        _unknown(endpoint_id)
    console.print(
        f"test event {webhook_id} queued for endpoint {endpoint_id} "
        f"(gatecast webhook-endpoints attempts {endpoint_id})"
    )


@endpoints_app.command("remove")
def remove_cmd(endpoint_id: Annotated[int, id_argument("the endpoint's id")]) -> None:
    """Remove an endpoint with its undelivered messages and its log."""
    from campaigns.webhook_endpoints import delete_endpoint

    engine = open_engine_or_fail()
    try:
        deleted = delete_endpoint(engine, endpoint_id)
    finally:
        engine.dispose()
    if not deleted:
        _unknown(endpoint_id)
    console.print(f"webhook endpoint {endpoint_id} removed")


@endpoints_app.command("attempts")
def attempts_cmd(
    endpoint_id: Annotated[int, id_argument("the endpoint's id")],
    limit: Annotated[int, typer.Option("--limit", min=1, max=10_000, help="attempts shown")] = 50,
    as_json: Annotated[bool, typer.Option("--json", help="print as JSON")] = False,
) -> None:
    """The endpoint's delivery attempts, newest first."""
    from campaigns.webhook_endpoints import attempts_page

    engine = open_engine_or_fail()
    try:
        page = attempts_page(engine, endpoint_id, limit=limit)
    finally:
        engine.dispose()
    if page is None:
        _unknown(endpoint_id)
    if as_json:
        print(json.dumps([a.to_dict() for a in page.items]))
        return
    if not page.items:
        console.print("no attempts yet")
        return
    table = Table(title=f"Deliveries to endpoint {endpoint_id} ({page.total} attempts)")
    for column in ("at", "message", "event", "attempt", "status", "ms", "outcome", "error"):
        table.add_column(column, overflow="fold")
    for a in page.items:
        table.add_row(
            a.at.strftime("%Y-%m-%d %H:%M:%S"),
            a.message_id,
            a.event,
            str(a.attempt),
            str(a.status_code or "-"),
            str(a.duration_ms),
            a.outcome,
            escape(a.error or ""),
        )
    console.print(table)


endpoints_app.command("deliveries", hidden=True, help="The same as attempts (its former name).")(
    attempts_cmd
)


def _since(value: str) -> datetime:
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        fail(f"--since {value!r}: write a date and time like 2026-11-25T09:00 (UTC)")
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


@endpoints_app.command("replay")
def replay_cmd(
    endpoint_id: Annotated[int, id_argument("the endpoint's id")],
    since: Annotated[
        str | None,
        typer.Option(
            "--since",
            help="also every message since this time (ISO 8601, UTC unless it says), "
            "delivered or not",
        ),
    ] = None,
) -> None:
    """Send again: enable the endpoint (after it was disabled) and make its failed
    messages, and with --since every message since then, due now, in their order."""
    from campaigns.webhook_endpoints import replay

    when = _since(since) if since is not None else None
    engine = open_engine_or_fail()
    try:
        requeued = replay(engine, endpoint_id, since=when)
    finally:
        engine.dispose()
    if requeued is None:
        _unknown(endpoint_id)
    console.print(f"webhook endpoint {endpoint_id} enabled; {requeued} messages to send again")


def register(app: typer.Typer) -> None:
    """Add ``gatecast webhook-endpoints`` to the root app."""
    app.add_typer(endpoints_app, name="webhook-endpoints")
