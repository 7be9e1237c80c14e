"""``gatecast demo`` (what ``make demo`` runs): sandbox, import, campaign, report."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated, Literal

import typer
from rich.console import Console

from gatecast.commands.common import log_to_stderr


def register(app: typer.Typer) -> None:
    """Add ``gatecast demo`` to the root app."""

    @app.command("demo")
    def demo_cmd(
        database: str | None = typer.Option(
            None, "--database", help="Database URL (default GATECAST_DATABASE_URL)."
        ),
        reports_dir: Annotated[
            Path | None,
            typer.Option("--reports-dir", help="Where reports go (default GATECAST_REPORTS_DIR)."),
        ] = None,
        serve: bool = typer.Option(
            False, "--serve", help="Keep serving the dashboard and API afterwards."
        ),
        gateway: str = typer.Option(
            "spec",
            "--gateway",
            help="The gateway the sandbox plays and gatecast drives: spec, evolution "
            "(Evolution API v2) or waha (WAHA).",
        ),
    ) -> None:
        """Run the whole product once against an embedded sandbox gateway."""
        from gatecast.demo import DemoOptions, run_demo
        from gatecast.settings import get_settings

        kinds: dict[str, Literal["spec", "evolution", "waha"]] = {
            "spec": "spec",
            "evolution": "evolution",
            "waha": "waha",
        }
        if gateway not in kinds:
            raise typer.BadParameter("must be spec, evolution or waha", param_hint="--gateway")
        log_to_stderr(logging.WARNING)
        code = run_demo(
            get_settings(),
            DemoOptions(
                database_url=database,
                reports_dir=reports_dir,
                keep_serving=serve,
                gateway=kinds[gateway],
            ),
            Console(),
        )
        raise typer.Exit(code)
