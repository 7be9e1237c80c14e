"""``gatecast instance``: thin commands over the gateway client for instance management.

Instances created or reset here are recorded in the ``instances`` table; ``status``
shows what gatecast knows (the gateway has no status endpoint: connection changes
arrive through the webhook).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from gatecast.commands.common import configured_secrets, fail, open_engine_or_fail

if TYPE_CHECKING:
    from gatecast.settings import Settings
    from gateway.client import GatewayClient
    from gateway.errors import GatewayError

console = Console()
err_console = Console(stderr=True)
instance_app = typer.Typer(
    help="Gateway instances: create, link by QR code, webhook, reboot, reset, logout, resume.",
    no_args_is_help=True,
)

T = TypeVar("T")

InstanceArg = Annotated[str, typer.Argument(help="The gateway's instance id.")]


def make_gateway_client(settings: Settings) -> GatewayClient:
    """The configured gateway client (its modules load when a command needs them)."""
    from gatecast.runtime import make_gateway_client as make

    return make(settings)


@contextmanager
def _client(settings: Settings) -> Iterator[GatewayClient]:
    from gatecast.runtime import GatewayNotConfigured

    try:
        client = make_gateway_client(settings)
    except GatewayNotConfigured as exc:
        fail(str(exc), 2)
    with client:
        yield client


def _gateway_failed(exc: GatewayError) -> NoReturn:
    problem = f", {exc.problem.value}" if exc.problem else ""
    fail(f"the gateway operation failed ({exc.kind.value}{problem}): {exc.message}")


def _call(fn: Callable[[], T]) -> T:
    from campaigns import instances as domain
    from gateway.errors import GatewayError, RequestValidationError

    try:
        return fn()
    except domain.LabelError as exc:
        fail(str(exc), 2)
    except domain.InstanceGone as exc:
        fail(
            f"{exc}: gatecast no longer uses it. Create a new instance (`gatecast instance "
            f"create`) and remove this one with `gatecast instance forget {exc.instance_id}`"
        )
    except RequestValidationError as exc:
        fail(str(exc), 2)
    except GatewayError as exc:
        _gateway_failed(exc)


def _default_webhook_url(settings: Settings) -> str | None:
    """The deployment's webhook URL (``GATECAST_PUBLIC_URL`` + route + secret; None
    without an address: a CLI command has none of its own to register). The secret is
    ``GATECAST_WEBHOOK_SECRET``, else the one generated into ``.gatecast-webhook-secret``
    (generated now when there is none, as ``serve`` would, which reads the same file)."""
    from campaigns.instances import webhook_address
    from gatecast.runtime.webhooks import with_webhook_secret

    if not settings.public_url.strip():
        return None
    with_secret, _ = with_webhook_secret(settings)
    secret = with_secret.webhook_secret.get_secret_value()
    return webhook_address(settings.public_url, "", secret)


@instance_app.command("create")
def create_cmd(
    label: Annotated[str, typer.Option(help="A name for it, shown in gatecast.")] = "",
) -> None:
    """Create an instance at the gateway and record it (the same id while one is unscanned)."""
    from campaigns import instances as domain
    from gatecast.settings import get_settings
    from storage.types import utcnow

    settings = get_settings()
    engine = open_engine_or_fail(settings, create=True)
    with _client(settings) as client:
        instance_id = _call(lambda: domain.create(engine, client, now=utcnow(), label=label))
    console.print(f"instance [bold]{instance_id}[/] created")
    console.print(f"next: [bold]gatecast instance qr {instance_id}[/] and scan it with the phone")


def _png_of(data_uri: str) -> bytes:
    header, sep, payload = data_uri.partition(",")
    if not sep or ";base64" not in header:
        fail("the gateway's QR code is not a base64 data URI")
    try:
        return base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        fail("the gateway's QR code is not valid base64")


def qr_text_of(png: bytes) -> str | None:
    """The text inside a QR code image, or None when it cannot be decoded here."""
    try:
        import io

        import zxingcpp
        from PIL import Image
    except ImportError:  # decoding is optional: zxing-cpp and Pillow are dev extras
        return None
    try:
        with Image.open(io.BytesIO(png)) as image:
            # QR codes only: a QR's modules can pass for a short ITF barcode too
            qr_only = zxingcpp.BarcodeFormats(zxingcpp.BarcodeFormat.QRCode)
            results = zxingcpp.read_barcodes(image.convert("L"), formats=qr_only)
    except Exception:  # an undecodable image is not an error: the PNG is still saved
        return None
    for result in results:
        text = getattr(result, "text", "")
        if text:
            return str(text)
    return None


@instance_app.command("qr")
def qr_cmd(
    instance_id: InstanceArg,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="PNG file (default qr-<instance>.png).")
    ] = None,
    show: Annotated[bool, typer.Option(help="Print the QR code in the terminal.")] = True,
) -> None:
    """Fetch the login QR code: save the PNG and print it in the terminal (it rotates ~20 s)."""
    from campaigns import instances as domain
    from gatecast.settings import get_settings
    from storage.types import utcnow

    settings = get_settings()
    engine = open_engine_or_fail(settings, create=True)  # records the instance
    with _client(settings) as client:
        qr = _call(lambda: domain.fetch_qr(engine, client, instance_id, now=utcnow()))
    if qr.already_linked:
        console.print(f"instance [bold]{instance_id}[/] is already linked (connected)")
        return
    if qr.data_uri is None:
        console.print(
            "the gateway delivers this QR code through the webhook "
            "(register one with `gatecast instance webhook`)"
        )
        return
    png = _png_of(qr.data_uri)
    path = output or Path(f"qr-{instance_id}.png")
    path.write_bytes(png)
    text = qr_text_of(png) if show else None
    if text is not None:
        import segno

        segno.make(text, error="l").terminal(compact=True)
    console.print(f"QR code saved to [bold]{path}[/]; scan it within ~20 s (it rotates)")
    if qr.state == "unconfirmed":
        console.print(
            "once scanned, campaigns may send through it: a connection event from the "
            "gateway, or its first send, confirms the link (`gatecast instance status`)",
            highlight=False,
        )


@instance_app.command("status")
def status_cmd(
    instance_id: Annotated[str | None, typer.Argument(help="One instance (default: all).")] = None,
) -> None:
    """What gatecast knows about its instances, paused senders with their reason
    (updated by the webhook and the dispatcher; not a live query)."""
    from campaigns import instances as domain
    from campaigns.delivery_lifecycle import BAD_TOKEN_PAUSE
    from gatecast.settings import get_settings

    settings = get_settings()
    engine = open_engine_or_fail(settings)
    from scheduler.care_view import describe, sender_care
    from scheduler.sender_usage import sender_usage
    from storage.types import utcnow

    now = utcnow()
    with engine.connect() as conn:
        records = domain.list_all(conn, instance_id)
        ids = [r.instance_id for r in records]
        care = sender_care(conn, ids, now, sender_usage(conn, ids, now))
    if not records:
        if instance_id:
            fail(f"gatecast knows no instance {instance_id!r}")
        console.print("no instances yet: `gatecast instance create`")
        return
    table = Table(title="instances (as gatecast last heard from the gateway)")
    table.add_column("instance", no_wrap=True, min_width=max(len(r.instance_id) for r in records))
    table.add_column("label", overflow="fold", min_width=5)
    table.add_column("state", no_wrap=True)
    table.add_column("paused", overflow="fold", min_width=6)
    table.add_column("hook", no_wrap=True)
    table.add_column("phone", overflow="fold")
    table.add_column("updated (UTC)")
    for r in records:
        pause = ""
        if r.paused_reason:
            since = f" (since {r.paused_at:%Y-%m-%d %H:%M})" if r.paused_at else ""
            pause = f"{r.paused_reason}{since}"
        table.add_row(
            escape(r.instance_id),
            escape(r.label),
            r.state,
            escape(pause),
            "yes" if r.webhook_url_registered else "no",
            r.phone or "",
            r.updated_at.strftime("%Y-%m-%d %H:%M"),
        )
    console.print(table)
    for r in records:  # sender care: warm-up, allowance today, health, 463 timelock
        if r.instance_id in care and r.state != "gone":
            line = describe(care[r.instance_id])
            console.print(f"care {escape(r.instance_id)}: {escape(line)}", highlight=False)
    unconfirmed = [r for r in records if r.state == "unconfirmed"]
    if unconfirmed:
        console.print(
            f"{len(unconfirmed)} instance(s) unconfirmed: their QR code was shown and the "
            "gateway has not said whether it was scanned (some gateways never do); "
            "campaigns send through them and the first send confirms the link: "
            + ", ".join(escape(r.instance_id) for r in unconfirmed),
            highlight=False,
        )
    gone = [r for r in records if r.state == "gone"]
    paused = [r for r in records if r.paused_reason and r.state != "gone"]
    if gone:
        console.print(
            f"{len(gone)} instance(s) no longer exist at the gateway and send nothing: "
            + ", ".join(escape(r.instance_id) for r in gone)
            + "; remove them with `gatecast instance forget ID`",
            highlight=False,
        )
    if paused:
        console.print(
            f"{len(paused)} paused sender(s) send nothing until resumed:", highlight=False
        )
        for r in paused:
            console.print(
                f"  {escape(r.instance_id)}: {escape(r.paused_reason or '')}", highlight=False
            )
        if any(r.paused_reason == BAD_TOKEN_PAUSE for r in paused):
            console.print(
                "the gateway refused the access token (one for every sender, not a "
                "sender's link): set GATECAST_ACCESS_TOKEN to the right token",
                highlight=False,
            )
        console.print("fix the cause, then `gatecast instance resume ID`", highlight=False)


def _operation(operation: str, done: str) -> Callable[[str], None]:
    def command(instance_id: InstanceArg) -> None:
        from campaigns import instances as domain
        from gatecast.settings import get_settings
        from storage.types import utcnow

        settings = get_settings()
        engine = open_engine_or_fail(settings)
        with _client(settings) as client:
            result = _call(
                lambda: domain.operate(engine, client, instance_id, operation, now=utcnow())
            )
        console.print(f"instance [bold]{escape(instance_id)}[/]: {done}")
        if result.resumed_reason:
            console.print(
                f"its pause ({escape(result.resumed_reason)}) is lifted: it sends again",
                highlight=False,
            )

    return command


instance_app.command("reboot", help="Log the instance out of the web client and start a new scan.")(
    _operation("reboot", "rebooted; scan a new QR code (`gatecast instance qr`)")
)
instance_app.command(
    "reconnect",
    help="Restart the connection after a connection loss (lifts a connection pause).",
)(_operation("reconnect", "reconnect requested"))
instance_app.command(
    "logout",
    help="Log the instance out of the web client (nothing is sent through it until it is "
    "linked again).",
)(
    _operation(
        "logout",
        "logged out; nothing is sent through it until it is linked again "
        "(`gatecast instance qr`, then the scan)",
    )
)


@instance_app.command("reset")
def reset_cmd(instance_id: InstanceArg) -> None:
    """Log out, get a NEW instance id and delete the old one's data at the gateway.

    Queued deliveries and the instance lists of unfinished campaigns follow the new id.
    When the gateway does not return the new id, the old one is marked gone (never used
    again): create a new instance or find the new id at the gateway.
    """
    from campaigns import instances as domain
    from gatecast.settings import get_settings
    from storage.types import utcnow

    settings = get_settings()
    engine = open_engine_or_fail(settings)
    with _client(settings) as client:
        result = _call(lambda: domain.reset(engine, client, instance_id, now=utcnow()))
    if result.new_id_unknown:
        console.print(
            f"[yellow]instance {escape(instance_id)} was reset, but the gateway did not return "
            "the new id.[/] The old id no longer exists at the gateway: gatecast marked it "
            "gone and sends nothing through it (its queued recipients go to other senders).\n"
            "Next: `gatecast instance create` (a gateway hands back the reset instance's id "
            "while it is unscanned) or look the new id up in your gateway's dashboard, link "
            f"it with `gatecast instance qr NEW_ID`, then `gatecast instance forget "
            f"{escape(instance_id)}`.",
            highlight=False,
        )
        return
    console.print(f"instance [bold]{instance_id}[/] reset: its new id is [bold]{result.new_id}[/]")
    if result.deliveries_moved or result.campaigns_updated:
        console.print(
            f"{result.deliveries_moved} waiting deliveries and "
            f"{len(result.campaigns_updated)} campaign(s) now use {result.new_id}",
            highlight=False,
        )


@instance_app.command("pause")
def pause_cmd(
    instance_id: InstanceArg,
    reason: Annotated[
        str, typer.Option("--reason", help="Said with the pause (at most 400 characters)")
    ] = "",
) -> None:
    """Stop sending through a sender until `gatecast instance resume` (its queued
    messages wait, or go to their campaigns' other senders)."""
    from campaigns import instances as domain
    from gatecast.settings import get_settings
    from storage.types import utcnow

    engine = open_engine_or_fail(get_settings())
    try:
        paused = domain.pause(engine, instance_id, reason, now=utcnow())
    except domain.UnknownInstance as exc:
        fail(str(exc))
    except ValueError as exc:
        fail(f"--reason: {exc}", code=2)
    word = "paused" if paused else "was already paused (that pause stays)"
    console.print(f"instance [bold]{escape(instance_id)}[/] {word}", highlight=False)


@instance_app.command("resume")
def resume_cmd(instance_id: InstanceArg) -> None:
    """Let a paused sender send again (paused for quota, a failure burst, its health
    score or relogin; its health score starts again from 0). Fix the cause first: the
    dispatcher pauses it again if it persists."""
    from campaigns import instances as domain
    from gatecast.settings import get_settings
    from storage.types import utcnow

    settings = get_settings()
    engine = open_engine_or_fail(settings)
    try:
        result = domain.resume(engine, instance_id, now=utcnow())
    except domain.UnknownInstance as exc:
        fail(str(exc))
    if result.cleared_reason is None:
        console.print(f"instance [bold]{escape(instance_id)}[/] was not paused")
    else:
        console.print(
            f"instance [bold]{escape(instance_id)}[/] resumed "
            f"(it was paused: {escape(result.cleared_reason)})",
            highlight=False,
        )


@instance_app.command("warmup")
def warmup_cmd(
    instance_id: InstanceArg,
    off: Annotated[
        bool, typer.Option("--off", help="No warm-up for this sender (only the daily cap).")
    ] = False,
    day: Annotated[
        int | None,
        typer.Option("--day", help="Today is this warm-up day (e.g. an older number: 5)."),
    ] = None,
    ramp: Annotated[
        str | None,
        typer.Option(
            "--ramp",
            help="This sender's own allowances of day 1, 2, ... (e.g. 15,30,60; after the "
            "last day: no warm-up limit).",
        ),
    ] = None,
) -> None:
    """Set a sender's warm-up: --off, --day N, --ramp 15,30,60 (none of them: back to the
    default ramp from its first day). Shown by `gatecast instance status`."""
    from campaigns import instances as domain
    from gatecast.settings import get_settings
    from storage.types import utcnow

    if off and (day is not None or ramp is not None):
        fail("--off turns the warm-up off: give it alone, without --day or --ramp")
    engine = open_engine_or_fail(get_settings())
    try:
        domain.set_warmup(
            engine, instance_id, domain.WarmupChange(off=off, day=day, ramp=ramp), now=utcnow()
        )
    except domain.UnknownInstance:
        fail(f"gatecast knows no instance {instance_id!r}")
    except domain.WarmupRefused as exc:
        fail(f"--{exc.field}: {exc}")
    what = (
        "off"
        if off
        else ", ".join(
            filter(None, [f"day {day} today" if day else "", f"ramp {ramp}" if ramp else ""])
        )
        or "the default ramp from its first day"
    )
    console.print(
        f"instance [bold]{escape(instance_id)}[/] warm-up: {escape(what)}", highlight=False
    )


@instance_app.command("forget")
def forget_cmd(instance_id: InstanceArg) -> None:
    """Remove an instance that no longer exists at the gateway from gatecast's senders.

    The gateway is not asked. Its queued recipients go to their campaigns' other senders;
    the messages it sent stay in the reports.
    """
    from campaigns import instances as domain
    from gatecast.settings import get_settings

    settings = get_settings()
    engine = open_engine_or_fail(settings)
    try:
        result = domain.forget(engine, instance_id)
    except domain.UnknownInstance as exc:
        fail(str(exc))
    console.print(f"instance {escape(instance_id)} forgotten", highlight=False)
    if result.released:
        console.print(
            f"{result.released} queued recipient(s) go to their campaigns' other senders",
            highlight=False,
        )


@instance_app.command("webhook")
def webhook_cmd(
    instance_id: InstanceArg,
    url: Annotated[
        str | None,
        typer.Option(help="Where the gateway posts events (default: from GATECAST_PUBLIC_URL)."),
    ] = None,
    disable: Annotated[bool, typer.Option("--disable", help="Turn the webhook off.")] = False,
) -> None:
    """Register (or with --disable, turn off) the instance's webhook."""
    from campaigns import instances as domain
    from gatecast.settings import get_settings
    from gateway.errors import redact
    from storage.types import utcnow

    settings = get_settings()
    target = url or _default_webhook_url(settings) or ""
    if not target and not disable:
        fail(
            "no webhook address: pass --url, or set GATECAST_PUBLIC_URL (the address that "
            "reaches `gatecast serve`)",
            2,
        )
    engine = open_engine_or_fail(settings, create=True)  # records the instance
    with _client(settings) as client:
        _call(
            lambda: domain.set_webhook(
                engine, client, instance_id, target, now=utcnow(), enable=not disable
            )
        )
    # the URL carries the webhook secret (the file's too)
    secrets = (*configured_secrets(), *_secret_in(target))
    shown = redact(target, secrets)
    console.print(
        f"instance [bold]{instance_id}[/]: webhook "
        + ("disabled" if disable else "set to " + escape(shown)),
        highlight=False,
    )


def _secret_in(url: str) -> tuple[str, ...]:
    """The webhook secret in a URL of gatecast's webhook route (nothing for others)."""
    from urllib.parse import unquote

    from campaigns.instances import WEBHOOK_PATH

    _, route, secret = url.partition(WEBHOOK_PATH)
    return (unquote(secret),) if route and secret else ()


def register(app: typer.Typer) -> None:
    """Add ``gatecast instance`` to the root app."""
    app.add_typer(instance_app, name="instance")
