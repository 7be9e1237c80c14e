"""gatecast against WAHA (issue 33): ``GATECAST_GATEWAY_KIND=waha`` and the sandbox in
the waha dialect (``gatecast sandbox --dialect waha``: its routes, ``X-Api-Key`` header,
errors and webhook events; docs/gateways.md).

The core journey (tests/journeys/gateway_kinds.py): the user links a sender (a WAHA
session gatecast creates and starts, WORKING once scanned), imports a CSV, is refused a
template campaign with the reason, creates and runs a text campaign (statuses sent ->
delivered -> read come as WAHA's ``message.ack`` events), ``serve`` registers its
webhook in the session's config (``message.any``, ``message.ack``, ``session.status``), a
recipient replies STOP (WAHA's ``message.any``) and is opted out, and the report shows
all of it; the HTTP API refuses the template campaign too. CLI subprocesses, ``serve``
for the reply and the API; SQLite and PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.journeys.gateway_kinds import DATABASES, run_core_journey, webhook_of
from tests.journeys.harness import QUICK_STATUSES, SANDBOX_TOKEN, Process, Workspace, workspace

SANDBOX_ARGS = (*QUICK_STATUSES, "--dialect", "waha")


@pytest.fixture
def ws(tmp_path: Path, sandbox_process: Process) -> Iterator[Workspace]:
    """A working directory whose gateway is the module's WAHA-dialect sandbox."""
    with workspace(tmp_path / "work", sandbox_process.url, GATECAST_GATEWAY_KIND="waha") as w:
        yield w


def _session(ws: Workspace, iid: str) -> dict[str, Any]:
    """WAHA's ``GET /api/sessions/{session}`` (status, config, me)."""
    answer = httpx.get(
        f"{ws.gateway_url}/api/sessions/{iid}", headers={"X-Api-Key": SANDBOX_TOKEN}, timeout=10
    )
    answer.raise_for_status()
    return dict(answer.json())


@pytest.mark.parametrize("database", DATABASES)
def test_a_campaign_through_waha(
    ws: Workspace, database: str, request: pytest.FixtureRequest
) -> None:
    def linked(iid: str) -> None:
        session = _session(ws, iid)
        assert (session["status"], session["me"]["id"].endswith("@c.us")) == ("WORKING", True)

    def served(iid: str) -> None:
        hooks = _session(ws, iid)["config"]["webhooks"]  # in the session's config
        masked = str(webhook_of(ws, iid))  # the inspection masks the secret part
        assert len(hooks) == 1 and hooks[0]["url"].startswith(masked.removesuffix("***")), hooks
        assert hooks[0]["events"] == ["message.any", "message.ack", "session.status"], hooks

    run_core_journey(
        ws,
        database,
        request,
        name="WAHA",
        refusal="WAHA cannot send template messages",
        endpoint="sendText",
        linked=linked,
        served=served,
    )
