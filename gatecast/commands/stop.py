"""``gatecast stop``: stop everything ``gatecast serve`` started for this state folder.

The intake outlives ``serve`` (a restart or upgrade keeps receiving), so stopping
``serve`` leaves it running for ``GATECAST_INTAKE_LINGER`` seconds; ``gatecast stop``
asks the folder's intake to SIGTERM every ``serve`` attached to it (each stops its
workers and web process), then stops itself.
"""

from __future__ import annotations

import typer
from rich.console import Console

console = Console()


def register(app: typer.Typer) -> None:
    """Add ``gatecast stop`` to the root app."""

    @app.command("stop")
    def stop_cmd() -> None:
        """Stop the intake of this state folder and every `gatecast serve` using it."""
        from gatecast.commands.common import fail_without_database
        from gatecast.intake import supervisor as sup
        from gatecast.runtime import open_engine
        from gatecast.runtime.receiver_control import state_folder
        from gatecast.settings import get_settings

        settings = get_settings()
        fail_without_database(settings)
        folder = state_folder(settings, open_engine(settings))
        running = sup.running_intake(folder)
        if running is None:
            console.print(f"no intake runs for {folder}", highlight=False, soft_wrap=True)
            return
        console.print(
            f"stopping the intake at {running['url']} (pid {running['pid']}) and the "
            "gatecast serve processes using it…",
            highlight=False,
            soft_wrap=True,
        )
        answer = sup.request(folder, "stop", timeout=2 * sup.STOP_SECONDS + 20)
        if answer is None:
            console.print("[red]error:[/] the intake did not answer", highlight=False)
            raise typer.Exit(1)
        console.print("stopped", highlight=False)
