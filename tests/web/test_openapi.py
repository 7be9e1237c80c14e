"""The OpenAPI document: valid, typed bodies and answers, every error declared."""

from __future__ import annotations

import io
import os
import re
from pathlib import Path
from typing import Any

import openpyxl
from openapi_spec_validator import validate

from tests.web.conftest import LiveApp


def _document(live: LiveApp) -> dict[str, Any]:
    with live.client() as api:
        res = api.get("/openapi.json")
    assert res.status_code == 200, res.text
    doc: dict[str, Any] = res.json()
    return doc


def _operations(doc: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (method, path, op)
        for path, item in doc["paths"].items()
        for method, op in item.items()
        if path.startswith("/api/v1/")
    ]


def test_the_document_validates(live_sqlite: LiveApp) -> None:
    validate(_document(live_sqlite))  # raises with the path of the first fault


def test_campaign_body_is_typed_with_one_model_per_message_kind(live_sqlite: LiveApp) -> None:
    doc = _document(live_sqlite)
    schemas = doc["components"]["schemas"]
    for path in ("/api/v1/campaigns", "/api/v1/campaigns/preview"):
        body = doc["paths"][path]["post"]["requestBody"]["content"]["application/json"]
        assert body["schema"] == {"$ref": "#/components/schemas/CampaignSpecBody"}
        assert body["examples"], path  # the example the route declares stays
    spec = schemas["CampaignSpecBody"]
    assert {"name", "message", "schedule", "pace", "audience"} <= set(spec["properties"])
    assert spec["required"] == ["name", "message"]
    message = spec["properties"]["message"]
    kinds = {k: v.rsplit("/", 1)[1] for k, v in message["discriminator"]["mapping"].items()}
    assert kinds == {
        "text": "TextMessage",
        "media": "MediaMessage",
        "interactive": "InteractiveMessage",
        "template": "TemplateMessage",
        "list": "ListMessage",
    }
    # each kind has only its own fields (campaigns.campaign_file.FIELDS_OF)
    assert set(schemas["TextMessage"]["properties"]) == {"type", "text"}
    assert "media_url" in schemas["MediaMessage"]["properties"]
    assert "buttons" not in schemas["MediaMessage"]["properties"]
    buttons = schemas["InteractiveMessage"]["properties"]["buttons"]["items"]
    assert buttons == {"$ref": "#/components/schemas/ButtonSpec"}
    assert "sections" in schemas["ListMessage"]["properties"]


def test_every_route_has_a_typed_answer_and_declares_its_errors(live_sqlite: LiveApp) -> None:
    doc = _document(live_sqlite)
    untyped = []
    for method, path, op in _operations(doc):
        answers = op["responses"]
        ok = [code for code in answers if code.startswith("2")]
        assert ok, (method, path)
        for code in ok:
            content = answers[code].get("content", {})
            schema = content.get("application/json", {}).get("schema")
            if code != "204" and "application/json" in content and not schema:
                untyped.append((method, path, code))
            if schema is not None and schema.get("type") == "object" and not schema.get("$ref"):
                untyped.append((method, path, code))
        for code in ("401", "422", "500"):
            problem = answers[code]["content"]["application/problem+json"]["schema"]
            assert problem == {"$ref": "#/components/schemas/ProblemPublic"}, (method, path)
        if "{" in path:  # an id that may not exist
            assert "404" in answers, (method, path)
    assert not untyped, untyped
    paths = doc["paths"]
    assert "409" in paths["/api/v1/campaigns/{campaign_id}/pause"]["post"]["responses"]
    assert "409" in paths["/api/v1/segments"]["post"]["responses"]
    for name in ("reboot", "reconnect", "logout", "reset", "link", "webhook"):
        item = paths[f"/api/v1/instances/{{instance_id}}/{name}"]
        found = next(iter(item.values()))["responses"]
        assert {"404", "409", "502"} <= set(found), name


def test_component_names_are_plain(live_sqlite: LiveApp) -> None:
    """Two models of one name get module-qualified components (``a__b__Name``), which
    client generators cannot resolve: every public model's name is unique."""
    names = _document(live_sqlite)["components"]["schemas"]
    assert not [n for n in names if "__" in n]


def test_operation_ids_are_tag_and_name(live_sqlite: LiveApp) -> None:
    doc = _document(live_sqlite)
    ids = [op["operationId"] for _, _, op in _operations(doc)]
    assert len(ids) == len(set(ids))
    assert [i for i in ids if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", i)] == []
    paths = doc["paths"]
    assert paths["/api/v1/campaigns"]["post"]["operationId"] == "campaigns_post_campaign"
    endpoint = paths["/api/v1/webhook-endpoints/{endpoint_id}"]["patch"]["operationId"]
    assert endpoint == "webhook_endpoints_patch_endpoint"
    test_send = paths["/api/v1/campaigns/{campaign_id}/test-sends"]["post"]["operationId"]
    assert test_send == "test_sends_post_test_send"


def test_refusals_and_creations_are_declared(live_sqlite: LiveApp) -> None:
    paths = _document(live_sqlite)["paths"]
    deleted = paths["/api/v1/campaigns/{campaign_id}"]["delete"]["responses"]
    assert "delete_refused" in deleted["409"]["description"]
    for path in ("/api/v1/campaigns/{campaign_id}/test-sends", "/api/v1/campaigns/test-send"):
        answers = paths[path]["post"]["responses"]
        assert {"409", "429"} <= set(answers), path
        assert "Retry-After" in answers["429"]["headers"], path
    created = [
        (path, method)
        for method, path, op in _operations({"paths": paths})
        if "201" in op["responses"]
    ]
    assert len(created) >= 10
    for path, method in created:
        assert "Location" in paths[path][method]["responses"]["201"]["headers"], path


def test_a_method_not_allowed_names_every_allowed_one(live_sqlite: LiveApp) -> None:
    with live_sqlite.client() as api:
        res = api.patch("/api/v1/campaigns", json={})
        assert res.status_code == 405 and res.json()["code"] == "method_not_allowed"
        assert res.headers["allow"] == "GET, POST"
        res = api.put("/api/v1/webhook-endpoints/1", json={})
        assert res.headers["allow"] == "DELETE, GET, PATCH"


OPERATION_IDS = Path(__file__).with_name("operation_ids.txt")


def test_operation_ids_are_the_checked_in_ones(live_sqlite: LiveApp) -> None:
    """Renaming an operation renames a generated client's call: every id, with its
    method and path, is pinned in ``operation_ids.txt``; change that file with the route."""
    doc = _document(live_sqlite)
    found = sorted(
        f"{op['operationId']} {method.upper()} {path}"
        for path, item in doc["paths"].items()
        for method, op in item.items()
    )
    lines = OPERATION_IDS.read_text().splitlines()
    if os.environ.get("GATECAST_UPDATE_OPERATION_IDS") == "1":  # a deliberate change
        header = [line for line in lines if line.startswith("#")]
        OPERATION_IDS.write_text("\n".join(header + found) + "\n")
        lines = OPERATION_IDS.read_text().splitlines()
    pinned = [line for line in lines if line and line[0] != "#"]
    assert found == pinned


def test_downloads_and_uploads_are_declared_for_generated_clients(live_sqlite: LiveApp) -> None:
    """Every file field is ``format: binary`` (sent as a file part); every download
    declares the type it answers (decision 69 in docs/architecture.md)."""
    doc = _document(live_sqlite)
    schemas = doc["components"]["schemas"]
    uploads = 0
    for _, _, op in _operations(doc):
        form = op.get("requestBody", {}).get("content", {}).get("multipart/form-data")
        if form:
            fields = schemas[form["schema"]["$ref"].rsplit("/", 1)[1]]["properties"]
            assert fields["file"]["format"] == "binary", op["operationId"]
            uploads += 1
    assert uploads == 5
    paths = doc["paths"]

    def content(path: str) -> dict[str, Any]:
        found: dict[str, Any] = paths[f"/api/v1{path}"]["get"]["responses"]["200"]["content"]
        return found

    report = "/campaigns/{campaign_id}/report"
    assert content(f"{report}.csv") == {"text/csv": {"schema": {"type": "string"}}}
    assert content(f"{report}.json")["application/json"]["schema"]["$ref"].endswith(
        "/ReportJsonPublic"
    )
    binary = {"schema": {"type": "string", "format": "binary"}}
    xlsx = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
    assert content(f"{report}.xlsx") == {xlsx: binary, "application/octet-stream": binary}
    assert list(content("/contacts/export")) == [xlsx, "application/octet-stream", "text/csv"]
    for path in ("/audit/export", "/imports/{import_id}/rejects.csv"):
        assert content(path) == {"text/csv": {"schema": {"type": "string"}}}, path


def _cells(xlsx: bytes) -> list[tuple[Any, ...]]:
    book = openpyxl.load_workbook(io.BytesIO(xlsx), read_only=True)
    return [row for sheet in book.worksheets for row in sheet.iter_rows(values_only=True)]


def test_a_binary_download_is_labelled_octet_stream_on_request(live_sqlite: LiveApp) -> None:
    with live_sqlite.client() as api:
        plain = api.get("/api/v1/contacts/export", params={"format": "xlsx", "opted_out": True})
        assert plain.headers["content-type"].startswith("application/vnd.openxmlformats"), (
            plain.text
        )
        asked = api.get(
            "/api/v1/contacts/export",
            params={"format": "xlsx", "opted_out": True},
            headers={"Accept": "application/octet-stream"},
        )
        assert asked.headers["content-type"] == "application/octet-stream"
        # the same workbook (its bytes differ by the file's own creation time)
        assert _cells(asked.content) == _cells(plain.content)
        csv_asked = api.get(
            "/api/v1/contacts/export",
            params={"opted_out": True},
            headers={"Accept": "text/csv, application/octet-stream"},
        )
        assert csv_asked.headers["content-type"].startswith("text/csv")
