"""An integrator generates a client from ``/openapi.json`` and, through it alone, drives
``gatecast serve`` (the sandbox sends): links a sender, imports a file, uploads a picture, creates
campaigns from a TOML upload and from JSON, follows them to the end, downloads each
report format and reads it as a user would, exports contacts, subscribes a webhook
endpoint, and gets a typed problem back (decision 69 in docs/architecture.md).

The Python client comes from openapi-python-client run as uv's isolated tool at a
pinned version (``GENERATOR``): its own dependencies (``typer<0.28``) would downgrade
gatecast's locked CLI library if it were one of our dev dependencies, so it is not.
The TypeScript journey (openapi-typescript and openapi-fetch, ``ts_client_journey.ts``)
shares this module's one server (``served``); the generators are in
``tests/journeys/generated_clients.py``.
"""

from __future__ import annotations

import csv
import importlib
import io
import json
import subprocess
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import openpyxl
import pytest

from tests.journeys.generated_clients import (
    CAMPAIGN_TOML,
    generate_python_client,
    generate_ts_client,
    hook_receiver,
    install_ts_tools,
    node_tools,
)
from tests.journeys.harness import API_KEY, SAMPLES, Process, Server, wait_for, workspace
from tests.media_files import png

pytestmark = pytest.mark.slow


@dataclass
class Served:
    """The module's one ``gatecast serve`` (SQLite), its OpenAPI document, where
    clients are generated, and a local webhook receiver's URL."""

    server: Server
    document: dict[str, Any]
    cache: Path
    hook_url: str
    #: the TypeScript client's folder, generated while the Python journey runs
    ts_client: Future[Path]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, sandbox_process: Process) -> Iterator[Served]:
    cache = tmp_path_factory.getbasetemp() / "generated-clients"
    script = Path(__file__).with_name("ts_client_journey.ts")
    # npm installs while the server starts, tsc compiles while the Python journey runs
    with ThreadPoolExecutor(1) as background:
        background.submit(install_ts_tools, cache / "typescript")
        with workspace(tmp_path_factory.mktemp("generated"), sandbox_process.url) as ws:
            server = ws.serve()
            with server.api() as api:
                document = api.get("/openapi.json").json()
            ts_client = background.submit(
                generate_ts_client, document, cache / "typescript", script
            )
            with hook_receiver() as url:
                yield Served(server, document, cache, url, ts_client)


def _call(module: str) -> Any:
    return importlib.import_module(f"gatecast_client.api.{module}")


def test_a_generated_python_client_drives_the_whole_journey(served: Served) -> None:
    client_pkg = generate_python_client(served.document, served.cache / "python")
    models = importlib.import_module("gatecast_client.models")
    types = importlib.import_module("gatecast_client.types")
    client = client_pkg.AuthenticatedClient(base_url=served.server.url, token=API_KEY)

    # link a sender: create the instance, ask for the link (the sandbox scans at once)
    made = _call("instances.instances_post_instance").sync(
        client=client, body=models.InstanceCreate(label="python client")
    )
    assert isinstance(made, models.InstancePublic), made
    _call("instances.instances_post_link").sync(client=client, instance_id=made.instance_id)
    read_instance = _call("instances.instances_get_instance")
    wait_for(
        lambda: (
            read_instance.sync(client=client, instance_id=made.instance_id).state == "connected"
        ),
        what="the sender to be connected",
    )

    # import a file: a multipart upload the generated client sends as a file part
    with (SAMPLES / "contacts.csv").open("rb") as fh:
        body = models.BodyImportsPostImport(
            file=types.File(payload=fh, file_name="contacts.csv", mime_type="text/csv"),
            list_name="py-customers",
        )
        job = _call("imports.imports_post_import").sync(client=client, body=body)
    assert isinstance(job, models.ImportPublic), job
    read_job = _call("imports.imports_get_import")
    done = wait_for(
        lambda: (j := read_job.sync(client=client, import_id=job.id)).status != "running" and j,
        what="the import",
    )
    assert (done.status, done.imported, done.list_name) == ("completed", 44, "py-customers")

    # upload a picture (binary) for a media message: its signed URL answers it
    picture = png(64, 48)
    media = _call("media.media_post_media").sync(
        client=client,
        body=models.BodyMediaPostMedia(
            file=types.File(
                payload=io.BytesIO(picture), file_name="sale.png", mime_type="image/png"
            )
        ),
    )
    assert isinstance(media, models.MediaPublic), media
    fetched = httpx.get(media.url, timeout=30)
    assert (fetched.headers["content-type"], fetched.content) == ("image/png", picture)

    # a campaign from a TOML file upload, and one from JSON with a typed message
    toml = CAMPAIGN_TOML.format(name="From TOML", list="py-customers").encode()
    from_toml = _call("campaigns.campaigns_post_campaign_toml").sync(
        client=client,
        body=models.BodyCampaignsPostCampaignToml(
            file=types.File(payload=io.BytesIO(toml), file_name="promo.toml")
        ),
        idempotency_key="py-toml-1",
    )
    assert isinstance(from_toml, models.CampaignCreated), from_toml
    assert from_toml.recipients == 44
    create = _call("campaigns.campaigns_post_campaign")
    body = models.CampaignSpecBody(
        name="From JSON",
        list_="py-customers",
        instances=[made.instance_id],
        message=models.InteractiveMessage(
            type_="interactive",
            text="Hi {{ name }}, pick one",
            buttons=[
                models.ButtonSpec(display_text="Yes", id="yes"),
                models.ButtonSpec(
                    kind=models.ButtonSpecKind.CTA_URL, display_text="Shop", url="https://x.test"
                ),
            ],
        ),
        pace=models.PaceSpec(per_minute=0, delay_seconds=[0, 0]),
    )
    from_json = create.sync(client=client, body=body, idempotency_key="py-json-1")
    assert isinstance(from_json, models.CampaignCreated), from_json
    assert from_json.recipients == 44

    # follow both to the end (created without a start, they start sending at once)
    read = _call("campaigns.campaigns_get_one")
    for created in (from_toml, from_json):
        got = wait_for(
            lambda c=created: (
                (g := read.sync(client=client, campaign_id=c.id)).state == "completed" and g
            ),
            what="the campaign to complete",
        )
        assert isinstance(got, models.CampaignDetailPublic)
        assert got.total == 44
    assert read.sync(client=client, campaign_id=from_json.id).message_type == "interactive"

    # each report format, read as a user reads it
    cid = from_toml.id
    text = _call("reports.reports_get_report_csv").sync(client=client, campaign_id=cid)
    assert isinstance(text, str), text
    rows = list(csv.DictReader(io.StringIO(text.removeprefix("\ufeff"))))  # Excel's BOM
    assert len(rows) == 44 and {r["state"] for r in rows} <= {"sent", "delivered", "read"}
    report = _call("reports.reports_get_report_json").sync(client=client, campaign_id=cid)
    assert isinstance(report, models.ReportJsonPublic), report
    assert (report.campaign.name, report.summary.total, len(report.deliveries)) == (
        "From TOML",
        44,
        44,
    )
    assert sorted(d["target"] for d in report.deliveries) == sorted(r["target"] for r in rows)
    xlsx = _call("reports.reports_get_report_xlsx").sync(client=client, campaign_id=cid)
    assert isinstance(xlsx, types.File), xlsx
    book = openpyxl.load_workbook(io.BytesIO(xlsx.payload.read()), read_only=True)
    sheets = {name: list(book[name].iter_rows(values_only=True)) for name in book.sheetnames}
    assert len(max(sheets.values(), key=len)) == 45, sheets.keys()  # a header and 44 rows

    # each download of personal data is in the audit log
    audit = _call("audit.audit_get_audit").sync(client=client, action="/report.")
    assert sorted(e.action.rsplit("/", 1)[1] for e in audit.items) == [
        "report.csv",
        "report.json",
        "report.xlsx",
    ]

    # the contact export, in both formats, as bytes
    export = _call("contacts.contacts_export_contacts")
    as_csv = export.sync(client=client, list_="py-customers")
    assert isinstance(as_csv, types.File), as_csv
    assert len(list(csv.DictReader(io.StringIO(as_csv.payload.read().decode("utf-8-sig"))))) == 44
    as_xlsx = export.sync(
        client=client, list_="py-customers", format_=models.ContactsExportContactsFormat.XLSX
    )
    sheet = openpyxl.load_workbook(io.BytesIO(as_xlsx.payload.read()), read_only=True).active
    assert sheet is not None and len(list(sheet.iter_rows(values_only=True))) == 45

    # subscribe a webhook endpoint: its secret is shown once, then it reads back
    endpoint = _call("webhook_endpoints.webhook_endpoints_post_endpoint").sync(
        client=client,
        body=models.EndpointCreate(url=served.hook_url, events=["*"], description="python"),
    )
    assert isinstance(endpoint, models.EndpointCreated), endpoint
    assert endpoint.secret.startswith("whsec_")
    again = _call("webhook_endpoints.webhook_endpoints_get_one").sync(
        client=client, endpoint_id=endpoint.id
    )
    assert (again.url, again.events, again.enabled) == (served.hook_url, ["*"], True)

    # a typed body the campaign file refuses: the field-named problem comes back typed
    bad = models.CampaignSpecBody(
        name="Bad", list_="py-customers", message=models.TextMessage(type_="text", text="")
    )
    refused = create.sync_detailed(client=client, body=bad)
    assert refused.status_code == 422
    problem = refused.parsed
    assert isinstance(problem, models.ProblemPublic), problem
    assert problem.code == "invalid_campaign"
    assert [e.loc for e in problem.errors] == [["body", "message", "text"]]


def test_a_generated_typescript_client_drives_the_whole_journey(served: Served) -> None:
    node, _ = node_tools()
    folder = served.ts_client.result()
    out = folder / "out"
    out.mkdir(exist_ok=True)
    env = {
        "PATH": str(Path(node).parent),
        "GATECAST_URL": served.server.url,
        "GATECAST_KEY": API_KEY,
        "CONTACTS_CSV": str(SAMPLES / "contacts.csv"),
        "CAMPAIGN_TOML": CAMPAIGN_TOML.format(name="TS TOML", list="ts-customers"),
        "HOOK_URL": served.hook_url,
        "OUT": str(out),
    }
    done = subprocess.run(
        [node, "journey.js"], cwd=folder, env=env, capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, done.stdout + done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["import"] == ["completed", 44]
    assert seen["recipients"] == [44, 44]
    assert seen["csv"] == ["target", 44]
    assert seen["json"] == ["TS TOML", 44, 44]
    assert seen["endpoint"] == [True, served.hook_url, True]
    assert seen["problem"] == [422, "invalid_campaign", ["body", "message", "text"]]
    # the downloads the script saved, opened as a user opens them
    report = openpyxl.load_workbook(out / "report.xlsx", read_only=True)
    sizes = [len(list(report[name].iter_rows(values_only=True))) for name in report.sheetnames]
    assert max(sizes) == 45, sizes
    contacts = openpyxl.load_workbook(out / "contacts.xlsx", read_only=True).active
    assert contacts is not None and len(list(contacts.iter_rows(values_only=True))) == 45
