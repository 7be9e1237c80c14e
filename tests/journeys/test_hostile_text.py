"""Text both databases store (issue 27): a NUL, a lone surrogate and a right-to-left override
sent through every string query parameter, path parameter and body field of the API (read
from its OpenAPI document, so a new route is covered without a change here) never answer
5xx, on SQLite and on PostgreSQL; a NUL in a body field is refused naming it. A webhook
event holding a NUL is stored and applied: a STOP written that way opts the contact out.

One ``gatecast serve`` per database for the module.
"""

from __future__ import annotations

import copy
import itertools
import json
import time
import uuid
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from tests.journeys.harness import SAMPLES, Server, link_sender_over_api, ok, workspace

SECRET = "journey-webhook-secret-0123456789"
#: what a person may type that no database stores, or that disguises a name
NUL, SURROGATE, RLO = "a\x00b", "x\ud800", "\u202egnp.exe"
#: a query string cannot carry a lone surrogate (bytes that are not UTF-8 decode to U+FFFD)
QUERY_VALUES = (NUL, RLO)
BODY_VALUES = (NUL, SURROGATE, RLO)
#: a valid body of the routes whose schema's sample is not one (each hostile value replaces
#: one field of it, so it reaches the rules behind that field)
BASES: dict[tuple[str, str], dict[str, Any]] = {
    ("POST", "/api/v1/contacts"): {"phone": "+4915112340000", "name": "Ann", "list_name": "x"},
    ("POST", "/api/v1/contacts/tag"): {"tag": "vip", "q": "Olivia"},
    ("POST", "/api/v1/contacts/untag"): {"tag": "vip", "q": "Olivia"},
    ("POST", "/api/v1/segments"): {"name": "berlin", "lists": ["customers"]},
    ("POST", "/api/v1/users"): {"name": "bob", "password": "a long enough password"},
    ("POST", "/api/v1/webhook-endpoints"): {"url": "https://example.com/hook", "events": ["*"]},
    ("POST", "/api/v1/campaigns/{campaign_id}/test-sends"): {"to": "+12025550143"},
    ("POST", "/api/v1/instances/{instance_id}/webhook"): {"url": "https://example.com/hook"},
}
#: a path element standing for a mapping's key (``attributes``: the key itself is sent)
KEY = object()

CAMPAIGN = {
    "name": "Spring sale",
    "list": "customers",
    "message": {"type": "text", "text": "Hello {{ name }}"},
    "schedule": {"start": "2099-01-01T09:00"},
}


@dataclass
class Served:
    """A serving ``gatecast`` with a linked sender, a list of contacts and a campaign."""

    server: Server
    dialect: str
    sender: str


def _pg_database(admin_url: str) -> Generator[str, None, None]:
    name = f"gatecast_t_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    try:
        yield sa.engine.make_url(admin_url).set(database=name).render_as_string(False)
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def served(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    sandbox_process: Any,
) -> Iterator[Served]:
    """One server per database: a sender linked, the sample contacts imported into
    ``customers``, a campaign scheduled, a user ``ann``."""
    settings = {
        "GATECAST_WEBHOOK_SECRET": SECRET,
        "GATECAST_ARGON2_MEMORY_KIB": "64",
        "GATECAST_ARGON2_TIME_COST": "1",
    }
    databases: Generator[str, None, None] | None = None
    if request.param == "postgresql":
        databases = _pg_database(request.getfixturevalue("pg_server"))
        settings["GATECAST_DATABASE_URL"] = next(databases)
    path = tmp_path_factory.mktemp(f"hostile-text-{request.param}")
    with workspace(path, sandbox_process.url, **settings) as ws:
        ws.run("db", "upgrade")
        ws.run("contacts", "import", str(SAMPLES / "contacts.csv"), "--list", "customers")
        server = ws.serve()
        with server.api() as api:
            sender = link_sender_over_api(api)
            ok(api.post("/api/v1/campaigns", json=CAMPAIGN), 201)
            body = {"name": "ann", "password": "a long enough password", "role": "viewer"}
            ok(api.post("/api/v1/users", json=body), 201)
        yield Served(server, request.param, sender)
    if databases is not None:
        databases.close()


# --- reading the OpenAPI document -----------------------------------------------------------


def _resolve(doc: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with its ``$ref``, ``allOf`` of one and nullable ``anyOf`` unwrapped."""
    for _ in range(20):
        if "$ref" in schema:
            schema = doc["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
        elif len(schema.get("allOf", [])) == 1:
            schema = schema["allOf"][0]
        elif "anyOf" in schema or "oneOf" in schema:
            options = [
                s for s in schema.get("anyOf", schema.get("oneOf", [])) if s != {"type": "null"}
            ]
            schema = options[0] if options else {"type": "null"}
        else:
            return schema
    return schema


def _sample(doc: dict[str, Any], schema: dict[str, Any], depth: int = 0) -> Any:
    """A small value the schema takes (required members only)."""
    schema = _resolve(doc, schema)
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    if kind == "object" or "properties" in schema:
        if depth > 6:
            return {}
        props = schema.get("properties", {})
        return {k: _sample(doc, props[k], depth + 1) for k in schema.get("required", [])}
    if kind == "array":
        return []
    if kind == "integer":
        return max(1, int(schema.get("minimum", 1)))
    if kind == "number":
        return 1
    if kind == "boolean":
        return False
    if schema.get("format") == "date-time":
        return "2099-01-01T00:00:00Z"
    return "sample"


def _takes_text(schema: dict[str, Any]) -> bool:
    return schema.get("type") == "string" and "enum" not in schema and "const" not in schema


def _string_paths(
    doc: dict[str, Any], schema: dict[str, Any], path: tuple[Any, ...] = (), depth: int = 0
) -> Iterator[tuple[Any, ...]]:
    """The path of every string a body of ``schema`` may hold (a list's first item, a
    mapping's key and value)."""
    if depth > 6:
        return
    options = [schema]
    raw = schema
    if "anyOf" in raw or "oneOf" in raw:
        options = [s for s in raw.get("anyOf", raw.get("oneOf", [])) if s != {"type": "null"}]
    for option in options:
        s = _resolve(doc, option)
        if _takes_text(s):
            yield path
        elif s.get("type") == "array" and isinstance(s.get("items"), dict):
            yield from _string_paths(doc, s["items"], (*path, 0), depth + 1)
        elif s.get("type") == "object" or "properties" in s:
            for name, sub in s.get("properties", {}).items():
                yield from _string_paths(doc, sub, (*path, name), depth + 1)
            extra = s.get("additionalProperties")
            if isinstance(extra, dict):
                yield (*path, KEY)
                yield from _string_paths(doc, extra, (*path, "k"), depth + 1)


def _with(base: Any, path: tuple[Any, ...], value: str) -> Any:
    """A copy of ``base`` with ``value`` at ``path`` (containers made on the way)."""
    out = copy.deepcopy(base)
    if not path:
        return value
    here = out
    for step, following in itertools.pairwise(path):
        if step is KEY:
            break
        fresh: Any = [] if following == 0 else {}
        if isinstance(here, list):
            while len(here) <= step:
                here.append(copy.deepcopy(fresh))
            if not isinstance(here[step], list | dict):
                here[step] = fresh
        else:
            if not isinstance(here.get(step), list | dict):
                here[step] = fresh
        here = here[step]
    last = path[-1]
    if last is KEY:
        here[value] = "v"
    elif isinstance(here, list):
        while len(here) <= last:
            here.append(value)
        here[last] = value
    else:
        here[last] = value
    return out


# --- the enumeration ------------------------------------------------------------------------


@dataclass(frozen=True)
class Sent:
    """One hostile request and its answer."""

    method: str
    path: str
    where: str
    value: str
    status: int
    text: str


def _path_values(served: Served) -> dict[str, str]:
    return {"instance_id": served.sender, "name": "ann"}


def _operations(doc: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, item in doc["paths"].items():
        for method, op in item.items():
            if method in ("get", "post", "put", "patch", "delete"):
                yield method.upper(), path, op


def _hostile_requests(
    served: Served, doc: dict[str, Any]
) -> Iterator[tuple[str, str, dict[str, Any], str, str]]:
    """``(method, url, httpx arguments, where, value)`` for every string parameter and
    body field of every operation, with each hostile value."""
    known = _path_values(served)
    for method, template, op in _operations(doc):
        params = [_resolve(doc, p) for p in op.get("parameters", [])]
        path_base = {p["name"]: known.get(p["name"], "1") for p in params if p["in"] == "path"}
        query_base = {
            p["name"]: _sample(doc, p["schema"])
            for p in params
            if p["in"] == "query" and p.get("required")
        }
        for p in params:
            if p["in"] not in ("path", "query") or not any(
                True for _ in _string_paths(doc, p["schema"])
            ):
                continue
            for value in QUERY_VALUES:
                path_args = {**path_base}
                query = {**query_base}
                if p["in"] == "path":
                    path_args[p["name"]] = value
                else:
                    query[p["name"]] = value
                url = template.format(**{k: _quote(v) for k, v in path_args.items()})
                yield method, url, {"params": query}, f"{p['in']}.{p['name']}", value
        body = op.get("requestBody", {}).get("content", {})
        url = template.format(**{k: _quote(v) for k, v in path_base.items()})
        if "application/json" in body:
            media = body["application/json"]
            schema = media.get("schema", {})
            examples = media.get("examples") or {}
            base = BASES.get((method, template)) or (
                next(iter(examples.values()))["value"] if examples else _sample(doc, schema)
            )
            for field in _string_paths(doc, schema):
                for value in BODY_VALUES:
                    content = json.dumps(_with(base, field, value))
                    args = {
                        "content": content,
                        "params": query_base,
                        "headers": {"Content-Type": "application/json"},
                    }
                    yield method, url, args, "body." + _show(field), value
        if "multipart/form-data" in body:
            schema = _resolve(doc, body["multipart/form-data"]["schema"])
            props = schema.get("properties", {})
            files = {
                k: ("contacts.csv", (SAMPLES / "contacts.csv").read_bytes())
                for k, s in props.items()
                if _resolve(doc, s).get("format") == "binary"
                or _resolve(doc, s).get("contentMediaType")
            }
            for name, sub in props.items():
                if name in files or not any(True for _ in _string_paths(doc, sub)):
                    continue
                for value in QUERY_VALUES:
                    args = {"files": files, "data": {name: value}, "params": query_base}
                    yield method, url, args, f"form.{name}", value


def _quote(value: str) -> str:
    from urllib.parse import quote

    return quote(value, safe="")


def _show(path: tuple[Any, ...]) -> str:
    return ".".join("<key>" if p is KEY else str(p) for p in path)


def test_hostile_text_in_every_parameter_and_field_answers_no_5xx(served: Served) -> None:
    started = time.monotonic()
    with served.server.api() as api:
        doc = ok(api.get("/openapi.json"))
        answers: list[Sent] = []
        for method, url, args, where, value in _hostile_requests(served, doc):
            try:
                res = api.request(method, url, timeout=30, **args)
            except httpx.TransportError as exc:  # an answer broken off: a 5xx too
                answers.append(Sent(method, url, where, value, 599, repr(exc)))
                continue
            answers.append(Sent(method, url, where, value, res.status_code, res.text[:300]))
        failed = [a for a in answers if a.status >= 500]
        assert not failed, "\n".join(
            f"{a.method} {a.path} {a.where}={a.value!r}: {a.status} {a.text}" for a in failed
        )
        # a NUL in a body field is refused, naming the field
        nul_taken = [
            a for a in answers if a.value == NUL and a.where.startswith("body.") and a.status < 400
        ]
        assert not nul_taken, nul_taken
        assert len(answers) > 300, len(answers)
        ok(api.get("/api/v1/campaigns"))
    assert time.monotonic() - started < 120


def test_refusals_name_the_field(served: Served) -> None:
    with served.server.api() as api:
        for url, loc in [
            ("/api/v1/contacts?q=a%00b", ["query", "q"]),
            ("/api/v1/campaigns?q=a%00b", ["query", "q"]),
            ("/api/v1/deliveries?target=a%00b", ["query", "target"]),
        ]:
            res = api.get(url)
            assert res.status_code == 422, res.text
            assert loc in [e["loc"] for e in res.json()["errors"]], res.text
        for url, body, loc in [
            ("/api/v1/lists", {"name": "a\x00b"}, ["body", "name"]),
            ("/api/v1/contacts", {"phone": "+4915112345600", "name": "a\x00b"}, ["body", "name"]),
            ("/api/v1/contacts", {"phone": "+4915112345600", "nmae": "Ann"}, ["body", "nmae"]),
        ]:
            res = api.post(url, json=body)
            assert res.status_code == 422, res.text
            assert loc in [e["loc"] for e in res.json()["errors"]], res.text
        res = api.post("/api/v1/lists", json={"name": "invoice\u202egnp.exe"})
        assert res.status_code == 422 and "bidirectional" in res.text, res.text


def test_a_stop_holding_a_nul_is_stored_and_opts_the_contact_out(served: Served) -> None:
    hook = f"{served.server.url}/webhooks/gateway/{SECRET}"
    with served.server.api() as api:
        # a contact the other tests leave alone (they change the first ones)
        listed = api.get("/api/v1/lists/1/contacts", params={"limit": 1, "offset": 40}).json()
        (contact,) = listed["items"]
        assert contact["opted_out"] is False, contact
        phone = contact["phone"]
        event = {
            "event": "message",
            "instance_id": served.sender,
            "data": {"id": "nul\x00-1", "chat": f"{phone[1:]}@s.whatsapp.net", "text": "ST\x00OP"},
        }
        res = httpx.post(
            hook,
            content=json.dumps(event),
            headers={"Content-Type": "application/json"},
            timeout=10,
        )
        assert res.status_code == 200, res.text
        found = api.get("/api/v1/contacts", params={"q": phone}).json()["items"]
        assert [c["opted_out"] for c in found if c["phone"] == phone] == [True], found
        contact_id = next(c["id"] for c in found if c["phone"] == phone)
        replies = ok(api.get(f"/api/v1/contacts/{contact_id}"))["replies"]
        assert [r["text"] for r in replies] == ["STOP"], replies
