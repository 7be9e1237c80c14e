"""gatecast against Evolution API v2 (issue 33): ``GATECAST_GATEWAY_KIND=evolution`` and
the sandbox in the evolution dialect (``gatecast sandbox --dialect evolution``: its
routes, ``apikey`` header, errors and webhook events; docs/gateways.md).

The core journey (tests/journeys/gateway_kinds.py): the user links a sender, imports a
CSV, is refused a template campaign with the reason, creates and runs a text campaign
(statuses sent -> delivered -> read come as Evolution's ``messages.update`` events), a
recipient replies STOP (Evolution's ``messages.upsert``) and is opted out, and the report
shows all of it; the HTTP API refuses the template campaign too. CLI subprocesses,
``serve`` for the reply and the API; SQLite and PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.journeys.gateway_kinds import DATABASES, run_core_journey
from tests.journeys.harness import QUICK_STATUSES, Process, Workspace, workspace

SANDBOX_ARGS = (*QUICK_STATUSES, "--dialect", "evolution")


@pytest.fixture
def ws(tmp_path: Path, sandbox_process: Process) -> Iterator[Workspace]:
    """A working directory whose gateway is the module's Evolution-dialect sandbox."""
    with workspace(tmp_path / "work", sandbox_process.url, GATECAST_GATEWAY_KIND="evolution") as w:
        yield w


@pytest.mark.parametrize("database", DATABASES)
def test_a_campaign_through_evolution_api(
    ws: Workspace, database: str, request: pytest.FixtureRequest
) -> None:
    run_core_journey(
        ws,
        database,
        request,
        name="Evolution",
        refusal="Evolution API cannot send template messages",
        endpoint="sendText",
    )
