"""``gatecast campaign run ID``: run one campaign in the foreground to its end.

Starts the campaign now if it is still scheduled, then dispatches only its rows with a
live progress bar until nothing is left to send (or it is paused). Statuses (delivered,
read) arrive through the webhook: run ``gatecast serve`` beside it, or pass
``--webhook`` to receive them in this process (the gateway must reach this machine).
Killing it at any moment is safe: see docs/scheduling-and-pacing.md, "Crash semantics".
"""

from __future__ import annotations

import contextlib
import logging
import sys
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.markup import escape

from gatecast.commands.common import id_argument, log_to_stderr, missing_database
from scheduler.defaults import DEFAULT_SENDER_GRACE_SECONDS

if TYPE_CHECKING:
    from gatecast.runtime.foreground import HeldUntilLater, RunOptions
    from gatecast.settings import Settings


def run_command(
    campaign_id: int,
    *,
    settings: Settings,
    options: RunOptions,
    console: Console,
) -> int:
    """The CLI body: returns the process exit code (0 when the campaign completed)."""
    from campaigns import lifecycle
    from campaigns.service import campaign_state
    from gatecast.runtime import GatewayNotConfigured, make_gateway_client, open_engine
    from gatecast.runtime.foreground import (
        HeldUntilLater,
        NoSenderCanSend,
        StartRefused,
        proof_webhook_url,
        receive_webhooks,
        run_campaign,
        settle,
    )
    from gatecast.runtime.webhooks import report_registrations
    from scheduler.webhook_keeper import ProvenLinks

    problem = missing_database(settings)
    if problem is not None:
        console.print(f"[red]error:[/] {problem}", highlight=False, soft_wrap=True)
        return 1
    try:
        engine = open_engine(settings)
        make_gateway_client(settings).close()  # fail fast, naming the missing variable
    except GatewayNotConfigured as exc:
        console.print(f"[red]error:[/] {exc}")
        return 2
    with contextlib.ExitStack() as stack:
        proven: ProvenLinks | None = None
        if options.webhook:  # every sender the campaign may use is registered now
            settings = receive_webhooks(stack, engine, campaign_id, settings, console)
        elif (url := proof_webhook_url(settings, engine)) is not None:
            # a sender linked behind gatecast's back: its first send proves it, and its
            # webhook is registered at serve's URL before its next send
            proven = ProvenLinks(
                engine,
                lambda: make_gateway_client(settings),
                url,
                concurrency=settings.webhook_register_concurrency,
                on_registered=lambda done: report_registrations(url, done, console),
            )
            stack.callback(proven.close)
        try:
            counts = run_campaign(
                engine,
                campaign_id,
                lambda: make_gateway_client(settings),
                options=options,
                console=console,
                proven_links=proven,
            )
        except LookupError as exc:
            console.print(f"[red]error:[/] {exc}")
            return 1
        except (lifecycle.InvalidTransition, StartRefused) as exc:
            console.print(f"[red]error:[/] cannot run: {exc}")
            return 1
        except NoSenderCanSend as exc:
            console.print(
                f"[red]campaign {campaign_id} cannot go on: no sender can send:[/] {exc.why}. "
                + _what_to_do(exc.why)
                + f", then `gatecast campaign run {campaign_id}` again, or let `gatecast "
                "serve` send it.",
                highlight=False,
            )
            return 3
        except HeldUntilLater as exc:
            console.print(held_text(exc), highlight=False)
            return 4
        if options.webhook:
            console.print("waiting for delivery statuses…")
            counts = settle(engine, campaign_id, options.settle_seconds)
    final = campaign_state(engine, campaign_id)
    state, reason = final if final else ("?", None)
    summary = ", ".join(f"{k} {v}" for k, v in counts.items() if v)
    console.print(f"campaign {campaign_id} is {state}{f' ({reason})' if reason else ''}: {summary}")
    if counts.get("unknown"):
        console.print(
            f"[yellow]{counts['unknown']} recipient(s) are 'unknown'[/] (the gateway did not say "
            f"whether the message left); `gatecast campaign retry {campaign_id} --unknown` "
            "resends them"
        )
    return 0 if state == lifecycle.COMPLETED else 1


def held_text(exc: HeldUntilLater) -> str:
    """What ``campaign run`` says when the rest waits for a later day."""
    from gatecast.runtime.holds_view import hold_lines

    cid = exc.campaign_id
    lines = [
        f"campaign {cid} stops here for today; it stays running.",
        *hold_lines(exc.hold),
        f"`gatecast serve` sends the rest when the hold lifts (or run `gatecast campaign run "
        f"{cid}` again then); `gatecast campaign show {cid}` says why it waits.",
    ]
    return "\n".join(escape(line) for line in lines)


def _what_to_do(why: str) -> str:
    """The advice after "no sender can send: WHY": a refused access token is fixed in the
    settings (it is the same for every sender), anything else by linking or resuming."""
    from campaigns.delivery_lifecycle import BAD_TOKEN_PAUSE

    if BAD_TOKEN_PAUSE in why:
        return (
            "The gateway refused the access token, which serves every sender (not a "
            "sender's link): set GATECAST_ACCESS_TOKEN to the token your gateway gave you, "
            "then `gatecast instance resume ID` for each paused sender"
        )
    return (
        "Link or resume a sender (`gatecast instance status`, `gatecast instance qr ID`, "
        "`gatecast instance resume ID`)"
    )


def register_run(campaign_app: typer.Typer) -> None:
    """Add ``run`` to the ``campaign`` command group."""

    @campaign_app.command("run")
    def run_cmd(
        campaign_id: int = id_argument("The campaign to run."),
        workers: int = typer.Option(4, min=1, max=64, help="Parallel sends (unpaced mode)."),
        batch_size: int = typer.Option(256, min=1, max=5000, help="Rows claimed per batch."),
        lease_seconds: float = typer.Option(
            120.0,
            min=1.0,
            envvar="GATECAST_DISPATCH_LEASE_SECONDS",
            help="How long a claimed row may stay 'sending' before it counts as lost "
            "(becomes 'unknown'). Keep it above the HTTP timeout.",
        ),
        progress: bool = typer.Option(True, help="Show a live progress bar."),
        webhook: bool = typer.Option(
            False,
            help="Receive delivery statuses in this process: serve the webhook on "
            "GATECAST_HOST (a free port, or GATECAST_PORT with GATECAST_PUBLIC_URL) and "
            "register it for the campaign's senders. Without it, run `gatecast serve`.",
        ),
        settle: float = typer.Option(
            15.0, min=0.0, help="With --webhook: how long to wait for statuses at the end."
        ),
        sender_grace: float = typer.Option(
            DEFAULT_SENDER_GRACE_SECONDS,
            min=0.0,
            envvar="GATECAST_SENDER_GRACE_SECONDS",
            help="Seconds a paused sender keeps its queued recipients before they go to "
            "the campaign's other senders.",
        ),
    ) -> None:
        """Run campaign ID in the foreground until nothing is left to send.

        Exit code 0 when it completed, 1 when it ended otherwise (paused, failed), 3 when
        no sender can send its waiting recipients, 4 when the rest waits for a later day
        (the warm-up allowance or the daily cap: it says why and when); with 3 and 4 it
        stays running for `serve`.
        """
        from gatecast.runtime.foreground import RunOptions
        from gatecast.settings import get_settings

        log_to_stderr(logging.WARNING)
        code = run_command(
            campaign_id,
            settings=get_settings(),
            options=RunOptions(
                workers=workers,
                batch_size=batch_size,
                lease_seconds=lease_seconds,
                progress=progress,
                webhook=webhook,
                settle_seconds=settle,
                sender_grace_seconds=sender_grace,
                send_concurrency=get_settings().send_concurrency,
            ),
            console=Console(stderr=True),
        )
        raise typer.Exit(code)


def main() -> None:
    """``python -m gatecast.commands.campaign_run ID ...`` (same as ``gatecast campaign run``)."""
    app = typer.Typer(add_completion=False)

    @app.callback()
    def _root() -> None:
        """gatecast campaign"""

    register_run(app)
    app(args=["run", *sys.argv[1:]])


if __name__ == "__main__":
    main()
