"""``gatecast campaign test|tests|archive|unarchive|delete`` and ``gatecast replies``:
a test send, the replies inbox, archiving and deleting (the rules:
``campaigns.test_sends``, ``campaigns.replies``, ``campaigns.archive``)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import typer
from rich.markup import escape
from rich.table import Table

from gatecast.commands.campaign import _errors, _print_json, _when, campaign_app, console
from gatecast.commands.common import INT64_MAX, fail, id_argument, open_engine_or_fail

if TYPE_CHECKING:
    from campaigns.test_sends import TestSend

#: the states after which a test send moves no more (read, failed) or is as far as asked
_SETTLED = ("read", "failed", "unknown")


@contextmanager
def _refusals() -> Iterator[None]:
    """The campaign commands' errors, plus this module's refusals, as one red line."""
    from campaigns.archive import DeleteRefused
    from campaigns.service import CampaignDeleted
    from campaigns.test_sends import TestSendRefused

    with _errors():
        try:
            yield
        except (DeleteRefused, CampaignDeleted) as exc:
            fail(str(exc))
        except TestSendRefused as exc:
            fail(f"{exc.field}: {exc}" if exc.kind == "invalid" else str(exc))


def _test_line(t: TestSend) -> str:
    reason = f" ({t.reason})" if t.reason else ""
    return (
        f"test send {t.id} of campaign {t.campaign_id} to {t.target} through {t.sender}: "
        f"{t.state}{reason}"
    )


@campaign_app.command("test")
def test_cmd(
    campaign_id: int = id_argument("Campaign id."),
    to: str = typer.Option(..., "--to", help="Phone number or group id (…@g.us) to send to."),
    contact: int | None = typer.Option(
        None,
        "--contact",
        min=1,
        max=INT64_MAX,
        help="Render for this contact id (default: the contact with that number, else the "
        "campaign's first recipient).",
    ),
    sender: str | None = typer.Option(
        None, "--sender", help="Sender instance id (default: the campaign's first usable one)."
    ),
    allow_opted_out: bool = typer.Option(
        False, "--allow-opted-out", help="Send even if the number's contact opted out."
    ),
    wait: float = typer.Option(
        0.0,
        "--wait",
        min=0,
        max=600,
        help="Seconds to follow the state (sent, delivered, read or failed) as the gateway's "
        "events arrive (needs `gatecast serve` or `receive` running to take them).",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Send the campaign's rendered message now to one number or group, as a test.

    Outside the campaign: no recipient row, count, report, daily cap or outbound webhook.
    """
    from campaigns import test_sends
    from gatecast.runtime import GatewayNotConfigured, make_gateway_client
    from gatecast.settings import get_settings

    settings = get_settings()
    with _refusals():
        engine = open_engine_or_fail(settings)
        try:
            client = make_gateway_client(settings)
        except GatewayNotConfigured as exc:
            fail(str(exc))
        with client:
            made = test_sends.send_test(
                engine,
                client,
                campaign_id,
                to=to,
                contact_id=contact,
                sender=sender,
                allow_opted_out=allow_opted_out,
                region=settings.default_region,
            )
        if not as_json:
            console.print(escape(_test_line(made)))
        deadline = time.monotonic() + wait
        shown = made.state
        while made.state not in _SETTLED and time.monotonic() < deadline:
            time.sleep(0.2)  # the CLI follows the database; the receiver applies events
            found = test_sends.get_test_send(engine, campaign_id, made.id)
            made = found or made
            if made.state != shown and not as_json:
                console.print(escape(_test_line(made)))
                shown = made.state
    if as_json:
        _print_json(asdict(made))


@campaign_app.command("tests")
def tests_cmd(
    campaign_id: int = id_argument("Campaign id."),
    limit: int = typer.Option(20, "--limit", min=1, max=1000, help="How many, newest first."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """List a campaign's test sends with their states, newest first."""
    from campaigns import test_sends

    with _refusals():
        engine = open_engine_or_fail()
        page = test_sends.test_sends_page(engine, campaign_id, limit=limit)
        items = [test_sends.get_test_send(engine, campaign_id, t.id) or t for t in page.items]
    if as_json:
        _print_json({"items": [asdict(t) for t in items], "total": page.total})
        return
    if not items:
        console.print(f"campaign {campaign_id} has no test sends yet")
        return
    table = Table(title=f"Test sends of campaign {campaign_id}")
    for col in ("id", "to", "sender", "state", "sent", "reason"):
        table.add_column(col)
    for t in items:
        table.add_row(
            str(t.id), t.target, escape(t.sender), t.state, _when(t.sent_at), escape(t.reason or "")
        )
    console.print(table)


def _mark(action: str, campaign_id: int, as_json: bool) -> None:
    from campaigns import archive, service

    with _refusals():
        engine = open_engine_or_fail()
        result: Any = getattr(archive, f"{action}_campaign")(engine, campaign_id)
        state = service.get_campaign(engine, campaign_id).state
    if as_json:
        _print_json({"id": campaign_id, "state": state, "done": action, "skipped": result or 0})
        return
    words = {"archive": "archived", "unarchive": "unarchived", "delete": "deleted"}[action]
    extra = f"; {result:,} queued recipient(s) skipped" if result else ""
    tail = " (its reports remain: gatecast report)" if action == "delete" else ""
    console.print(f"campaign {campaign_id} {words}{extra}{tail}")


@campaign_app.command("archive")
def archive_cmd(
    campaign_id: int = id_argument("Campaign id."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Archive a campaign: left out of `campaign list` (see --archived); reversible."""
    _mark("archive", campaign_id, as_json)


@campaign_app.command("unarchive")
def unarchive_cmd(
    campaign_id: int = id_argument("Campaign id."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Bring an archived campaign back into `campaign list`."""
    _mark("unarchive", campaign_id, as_json)


@campaign_app.command("delete")
def delete_cmd(
    campaign_id: int = id_argument("Campaign id."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Delete a campaign (refused while running; a scheduled or paused one is cancelled).

    Its sent history stays readable with `gatecast report`.
    """
    _mark("delete", campaign_id, as_json)


replies_app = typer.Typer(
    help="The replies inbox: list replies, answer one, mark one handled.",
    invoke_without_command=True,
)


@replies_app.callback()
def replies_cmd(
    ctx: typer.Context,
    campaign: int | None = typer.Option(
        None, "--campaign", min=1, max=INT64_MAX, help="Only replies to this campaign."
    ),
    sender: str | None = typer.Option(None, "--sender", help="Only what this sender received."),
    opt_outs: bool | None = typer.Option(
        None, "--opt-outs/--no-opt-outs", help="Only opt-outs (STOP), or none of them."
    ),
    handled: bool | None = typer.Option(
        None, "--handled/--unhandled", help="Only replies answered or marked handled, or none."
    ),
    limit: int = typer.Option(50, "--limit", min=1, max=1000, help="How many, newest first."),
    offset: int = typer.Option(0, "--offset", min=0, max=INT64_MAX, help="How many to skip."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """The replies inbox: incoming messages across campaigns, newest first."""
    if ctx.invoked_subcommand is not None:
        return
    from campaigns.replies import replies_page

    with _refusals():
        page = replies_page(
            open_engine_or_fail(),
            campaign_id=campaign,
            sender=sender,
            opt_out=opt_outs,
            handled=handled,
            limit=limit,
            offset=offset,
        )
    if as_json:
        items = [asdict(r) for r in page.items]
        _print_json({"items": items, "total": page.total, "limit": limit, "offset": offset})
        return
    if not page.items:
        console.print(
            "no replies match"
            if campaign or sender or opt_outs is not None or handled is not None
            else "no replies yet"
        )
        return
    table = Table(title=f"Replies ({page.total:,})")
    for col in ("id", "received", "from", "campaign", "sender", "text", "handled"):
        table.add_column(col, overflow="fold")
    for r in page.items:
        who = " ".join(filter(None, [r.contact_name, r.phone or r.chat]))
        text = ("[opt-out] " if r.is_opt_out else "") + r.text
        if r.button_id or r.row_id:
            text += f" (tapped {'button' if r.button_id else 'row'} {r.button_id or r.row_id})"
        campaign_text = f"{r.campaign_id} {r.campaign_name}" if r.campaign_id else "-"
        table.add_row(
            str(r.id),
            _when(r.received_at),
            escape(who),
            escape(campaign_text),
            escape(r.sender or ""),
            escape(text),
            _when(r.handled_at) if r.handled_at else "-",
        )
    console.print(table)


@replies_app.command("answer")
def answer_cmd(
    reply_id: int = id_argument("The reply's id (gatecast replies)."),
    text: str = typer.Argument(..., help="The answer's text."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Answer a reply with a text message; the reply is marked handled.

    It goes to whoever wrote, through the sender that received it, on the paced path."""
    from campaigns.replies import ReplyNotFound, answer_reply
    from gatecast.commands.message import send_and_print, send_settings

    try:
        send_and_print(
            lambda engine: answer_reply(
                engine, reply_id, message={"type": "text", "text": text}, **send_settings()
            ),
            as_json,
        )
    except ReplyNotFound:
        fail(f"no reply {reply_id} (gatecast replies lists them)")
    if not as_json:
        console.print(f"reply {reply_id} marked handled")


@replies_app.command("handled")
def handled_cmd(
    reply_id: int = id_argument("The reply's id (gatecast replies)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Mark a reply handled without answering it (a second time changes nothing)."""
    from campaigns.replies import ReplyNotFound, mark_handled

    engine = open_engine_or_fail()
    try:
        reply = mark_handled(engine, reply_id)
    except ReplyNotFound:
        fail(f"no reply {reply_id} (gatecast replies lists them)")
    finally:
        engine.dispose()
    if as_json:
        _print_json(asdict(reply))
        return
    assert reply.handled_at is not None
    console.print(f"reply {reply_id} marked handled ({_when(reply.handled_at)})")


def register(app: typer.Typer) -> None:
    """Add ``gatecast replies`` (the ``campaign`` commands register on import)."""
    app.add_typer(replies_app, name="replies")
