"""``gatecast message``: one message to one recipient through the paced path, and its
state (the rules: ``campaigns.direct_messages``, as ``POST /api/v1/messages``)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape

from gatecast.commands.common import fail, id_argument, open_engine_or_fail

if TYPE_CHECKING:
    from sqlalchemy import Engine

console = Console()
message_app = typer.Typer(
    help="Single messages: send one to one recipient through the paced path, show its state.",
    no_args_is_help=True,
)


def parse_metadata(text: str | None) -> dict[str, Any] | None:
    """``--metadata`` as a JSON object (exit 2 naming it otherwise)."""
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        fail(f"--metadata: not valid JSON ({exc.msg})", 2)
    if not isinstance(value, dict):
        fail("--metadata: must be a JSON object", 2)
    return value


def send_settings() -> dict[str, Any]:
    """What a message is sent with besides its own fields (as the API's): the region,
    contact cooldown and identical-message guard of this deployment, and now."""
    from gatecast.settings import get_settings
    from storage.types import utcnow

    s = get_settings()
    return {
        "region": s.default_region,
        "now": utcnow(),
        "default_cooldown_hours": s.contact_cooldown_hours,
        "default_max_identical": s.max_identical_in_row,
    }


def refused_input(exc: Exception) -> NoReturn:
    """A refused message or reply rule (its field named) as one red line, exit code 2."""
    from campaigns.campaign_file import CampaignFileError
    from campaigns.direct_messages import MessageError
    from campaigns.reply_rules import RuleError

    if isinstance(exc, (MessageError, RuleError)):
        fail(f"{exc.field}: {exc}", 2)
    if isinstance(exc, CampaignFileError):
        fail("; ".join(str(e) for e in exc.errors) or str(exc), 2)
    raise exc


def message_of(text: str | None, media: str | None, message: str | None) -> dict[str, Any] | None:
    """The message the options give (None: none given): ``--text``; ``--media`` a file's
    URL (``--text`` its caption); or ``--message``, a campaign file's ``[message]`` as
    JSON (any type: buttons, a list ...). Exit 2 naming the option otherwise."""
    if message is not None:
        if text is not None or media is not None:
            fail("--message: give it alone, without --text or --media", 2)
        try:
            value = json.loads(message)
        except json.JSONDecodeError as exc:
            fail(f"--message: not valid JSON ({exc.msg})", 2)
        if not isinstance(value, dict):
            fail("--message: must be a JSON object, a campaign file's [message]", 2)
        return value
    if media is not None:
        shown = {"caption": text} if text is not None else {}
        return {"type": "media", "media_url": media, **shown}
    return None if text is None else {"type": "text", "text": text}


def send_and_print(send: Callable[[Engine], int], as_json: bool) -> None:
    """Run ``send`` (it stores a message, its id) and print the message's state; a
    refused message as one red line, exit code 2."""
    from campaigns.campaign_file import CampaignFileError
    from campaigns.direct_messages import MessageError

    engine = open_engine_or_fail()
    try:
        try:
            message_id = send(engine)
        except (MessageError, CampaignFileError) as exc:
            refused_input(exc)
        out = message_state(engine, message_id)
    finally:
        engine.dispose()
    assert out is not None
    print_state(out, as_json)


def message_state(engine: Engine, message_id: int) -> dict[str, Any] | None:
    """A direct message as ``GET /api/v1/messages/{id}`` shows it (None: no such message)."""
    from campaigns.direct_messages import get_message
    from scheduler.holds import recipient_holds
    from storage.types import utcnow

    found = get_message(engine, message_id)
    if found is None:
        return None
    hold = None
    if found.state == "queued" and found.delivery_id is not None:
        for r in recipient_holds(engine, found.id, utcnow(), limit=1):
            if r.hold is not None:
                hold = r.hold.as_dict()
    data = {k: v for k, v in found.__dict__.items() if k != "delivery_id"}
    for key, value in data.items():
        if hasattr(value, "isoformat"):
            data[key] = value.isoformat()
    return {**data, "hold": hold}


def print_state(out: dict[str, Any], as_json: bool) -> None:
    """A message's state in words (or JSON)."""
    if as_json:
        print(json.dumps(out, ensure_ascii=False))
        return
    through = f" through {out['sender']}" if out["sender"] else ""
    console.print(f"message {out['id']} to {escape(out['to'])}{through}: [bold]{out['state']}[/]")
    if out["reason"]:
        console.print(f"why: {escape(out['reason'])}")
    if out["hold"]:
        until = f" (until {out['hold']['until']})" if out["hold"]["until"] else ""
        console.print(f"waiting: {escape(out['hold']['words'])}{until}")


@message_app.command("send")
def send_cmd(
    to: Annotated[str, typer.Option("--to", help="the recipient's phone")],
    text: Annotated[
        str | None,
        typer.Option("--text", help="the message's text, or a media's caption ({{ name }} works)"),
    ] = None,
    media: Annotated[
        str | None, typer.Option("--media", help="a picture's, video's or document's URL")
    ] = None,
    message: Annotated[
        str | None,
        typer.Option(
            "--message", help="the message as JSON, a campaign file's [message] (any type)"
        ),
    ] = None,
    instances: Annotated[
        list[str] | None,
        typer.Option("--instance", help="a sender it may go through (repeatable; default any)"),
    ] = None,
    metadata: Annotated[
        str | None, typer.Option("--metadata", help="a JSON object echoed in webhook events")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print as JSON")] = False,
) -> None:
    """Send one message to one recipient through the paced path (pace, daily cap,
    warm-up): a text, a media file with --media, or any kind (buttons, a list) with
    --message; an opted-out recipient's is skipped, with the reason. A contact is created
    for a number gatecast does not know."""
    from campaigns.direct_messages import send_message

    meta = parse_metadata(metadata)
    body = message_of(text, media, message)
    if body is None:
        fail("give --text, --media or --message", 2)
    send_and_print(
        lambda engine: send_message(
            engine,
            to=to,
            message=body,
            instances=instances or None,
            metadata=meta,
            **send_settings(),
        ),
        as_json,
    )


@message_app.command("show")
def show_cmd(
    message_id: Annotated[int, id_argument("the message's id (printed by message send)")],
    as_json: Annotated[bool, typer.Option("--json", help="print as JSON")] = False,
) -> None:
    """A message and where it is (queued, sending, sent, delivered, read, failed,
    unknown or skipped), with why it waits while queued."""
    engine = open_engine_or_fail()
    try:
        out = message_state(engine, message_id)
    finally:
        engine.dispose()
    if out is None:
        fail(f"no message {message_id}")
    print_state(out, as_json)


def register(app: typer.Typer) -> None:
    """Add ``gatecast message`` to the root app."""
    app.add_typer(message_app, name="message")
