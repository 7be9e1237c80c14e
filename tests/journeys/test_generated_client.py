"""An integrator generates a Python client from ``/openapi.json`` with
openapi-python-client and, through it alone, creates a campaign with a typed message
against ``gatecast serve`` (the sandbox sends it) and reads it back.

The generator runs as uv's isolated tool at a pinned version (``GENERATOR``): its own
dependencies (``typer<0.28``) would downgrade gatecast's locked CLI library if it were
one of our dev dependencies, so it is not.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.journeys.harness import (
    API_KEY,
    SAMPLES,
    Workspace,
    import_over_api,
    link_sender_over_api,
    wait_for,
)

GENERATOR = "openapi-python-client==0.29.1"
UV = Path(sys.executable).with_name("uv")


def _generate(document: dict[str, Any], where: Path) -> Any:
    """The client package generated from ``document`` into ``where``, imported."""
    where.mkdir(parents=True, exist_ok=True)
    spec = where / "openapi.json"
    spec.write_text(json.dumps(document))
    done = subprocess.run(
        [
            *(str(UV), "tool", "run", "--from", GENERATOR, "openapi-python-client", "generate"),
            *("--path", str(spec), "--output-path", str(where / "gatecast_client")),
            *("--meta", "none"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Warning" not in done.stdout, done.stdout  # every schema understood
    sys.path.insert(0, str(where))
    try:
        return importlib.import_module("gatecast_client")
    finally:
        sys.path.remove(str(where))


@pytest.mark.slow
def test_a_generated_client_creates_and_reads_a_campaign(tmp_path: Path, ws: Workspace) -> None:
    server = ws.serve()
    api = server.api()
    sender = link_sender_over_api(api)
    import_over_api(api, SAMPLES / "contacts.csv", "customers")
    client_pkg = _generate(api.get("/openapi.json").json(), tmp_path / "gen")

    models = importlib.import_module("gatecast_client.models")
    create = importlib.import_module("gatecast_client.api.campaigns.campaigns_post_campaign")
    read = importlib.import_module("gatecast_client.api.campaigns.campaigns_get_one")
    client = client_pkg.AuthenticatedClient(base_url=server.url, token=API_KEY)
    body = models.CampaignSpecBody(
        name="Generated",
        list_="customers",
        instances=[sender],
        message=models.InteractiveMessage(
            type_="interactive",
            text="Hi {{ name }}, pick one",
            buttons=[
                models.ButtonSpec(display_text="Yes", id="yes"),
                models.ButtonSpec(
                    kind=models.ButtonSpecKind.CTA_URL,
                    display_text="Shop",
                    url="https://x.test",
                ),
            ],
        ),
        pace=models.PaceSpec(per_minute=0, delay_seconds=[0, 0]),
    )
    created = create.sync(client=client, body=body, idempotency_key="gen-1")
    assert isinstance(created, models.CampaignCreated), created
    assert created.recipients == 44

    def finished() -> Any:
        got = read.sync(client=client, campaign_id=created.id)
        return got if got.state == "completed" else None

    got = wait_for(finished, what="the campaign to complete")
    assert isinstance(got, models.CampaignDetailPublic)
    assert (got.name, got.message_type, got.total) == ("Generated", "interactive", 44)
    spec = got.spec.to_dict()
    assert [b["display_text"] for b in spec["message"]["buttons"]] == ["Yes", "Shop"]

    # a typed body the campaign file refuses: the field-named problem comes back typed
    bad = models.CampaignSpecBody(
        name="Bad", list_="customers", message=models.TextMessage(type_="text", text="")
    )
    refused = create.sync_detailed(client=client, body=bad)
    assert refused.status_code == 422
    problem = refused.parsed
    assert isinstance(problem, models.ProblemPublic), problem
    assert problem.code == "invalid_campaign"
    assert [e.loc for e in problem.errors] == [["body", "message", "text"]]
