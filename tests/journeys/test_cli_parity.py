"""An operator does from the command line what the API and the dashboard do: sends one
message and follows its state (an opted-out number's is skipped, with the reason),
works the replies inbox (unhandled ones, answering one, marking one handled), sees
which campaigns use a media file and deletes it once none will still send it, and
edits a saved segment."""

from __future__ import annotations

import re

import httpx
import pytest

from tests.journeys.harness import Process, Workspace, wait_for
from tests.media_files import png

WRITER = "+12125550781"
OPTED_OUT = "+12125550782"
SENT = ("sent", "delivered", "read")
#: SQLite in every run; PostgreSQL with the slow tests (each run is a minute of commands)
DIALECTS = pytest.mark.parametrize(
    "dialect",
    ["sqlite", pytest.param("postgresql", marks=[pytest.mark.postgres, pytest.mark.slow])],
)


def _on(ws: Workspace, dialect: str, request: pytest.FixtureRequest) -> None:
    """Point the workspace at a fresh PostgreSQL database when ``dialect`` says so."""
    if dialect == "postgresql":
        ws.settings["GATECAST_DATABASE_URL"] = str(request.getfixturevalue("pg_url"))
        ws.run("db", "upgrade")


def _id(output: str, what: str) -> str:
    found = re.search(rf"\b{what} (\d+)\b", output)
    assert found, output
    return found.group(1)


def _state(ws: Workspace, message_id: str) -> str:
    return str(ws.run("message", "show", message_id, "--json").json()["state"])


@DIALECTS
def test_messages_and_replies_on_the_command_line(
    ws: Workspace, sandbox_process: Process, dialect: str, request: pytest.FixtureRequest
) -> None:
    _on(ws, dialect, request)
    ws.serve()  # sends the messages, takes the gateway's events and the replies
    iid = ws.link_sender()
    (ws.path / "stop.csv").write_text(f"Phone\n{OPTED_OUT}\n", encoding="utf-8")
    ws.run("contacts", "import", str(ws.path / "stop.csv"), "--opt-out")

    sent = ws.run(
        "message", "send", "--to", WRITER, "--text", "Your order has shipped",
        "--metadata", '{"ticket": "T-1"}',
    ).output  # fmt: skip
    assert f"to {WRITER}" in sent and "queued" in sent, sent
    first = _id(sent, "message")
    wait_for(lambda: _state(ws, first) in SENT, what="the message sent")
    shown = ws.run("message", "show", first).output
    assert f"through {iid}" in shown, shown
    assert ws.run("message", "show", first, "--json").json()["metadata"] == {"ticket": "T-1"}

    skipped = _id(ws.run("message", "send", "--to", OPTED_OUT, "--text", "Hi").output, "message")
    wait_for(lambda: _state(ws, skipped) == "skipped", what="the opted-out message skipped")
    why = ws.run("message", "show", skipped).output
    assert "skipped" in why and "why:" in why and "opt" in why.lower(), why

    bad = ws.run("message", "send", "--to", "12", "--text", "Hi", ok=False)
    assert bad.code == 2 and "to: " in bad.output, bad.output
    bad = ws.run("message", "send", "--to", WRITER, "--text", "Hi", "--metadata", "[1]", ok=False)
    assert bad.code == 2 and "--metadata: must be a JSON object" in bad.output, bad.output
    missing = ws.run("message", "show", "999999", ok=False)
    assert missing.code == 1 and "no message 999999" in missing.output, missing.output

    # replies: a person writes in twice; one is answered, the other marked handled
    for text in ("Where is my order?", "Thanks!"):
        httpx.post(
            f"{sandbox_process.url}/sandbox/instances/{iid}/incoming",
            json={"from": WRITER.lstrip("+"), "text": text},
            timeout=10,
        ).raise_for_status()
    inbox = wait_for(
        lambda: (r := ws.run("replies", "--unhandled", "--json").json())["total"] == 2 and r,
        what="two unhandled replies",
    )
    by_text = {r["text"]: str(r["id"]) for r in inbox["items"]}
    assert "Where is my order?" in ws.run("replies", "--unhandled").output
    answered = ws.run("replies", "answer", by_text["Where is my order?"], "It ships today").output
    assert "marked handled" in answered, answered
    answer_id = _id(answered, "message")
    wait_for(lambda: _state(ws, answer_id) in SENT, what="the answer sent")
    handled = ws.run("replies", "handled", by_text["Thanks!"]).output
    assert f"reply {by_text['Thanks!']} marked handled" in handled, handled
    assert ws.run("replies", "--unhandled", "--json").json()["total"] == 0
    done = ws.run("replies", "--handled", "--json").json()
    assert sorted(str(r["id"]) for r in done["items"]) == sorted(by_text.values())
    assert ws.run("replies", "--unhandled").output.strip() == "no replies match"
    for args in (("answer", "999999", "Hi"), ("handled", "999999")):
        gone = ws.run("replies", *args, ok=False)
        assert gone.code == 1 and "no reply 999999" in gone.output, gone.output
    # the answer went to the writer, and the messages are no campaigns of the list
    got = httpx.get(
        f"{sandbox_process.url}/sandbox/messages", params={"to": WRITER.lstrip("+")}, timeout=10
    ).json()
    assert sum("It ships today" in str(m["payload"]) for m in got) == 1, got
    assert ws.run("campaign", "list", "--json").json() == []


@DIALECTS
def test_media_uses_delete_and_segment_edit(
    ws: Workspace, dialect: str, request: pytest.FixtureRequest
) -> None:
    _on(ws, dialect, request)
    ws.settings["GATECAST_PUBLIC_URL"] = "http://gatecast.example"
    ws.link_sender()
    people = ws.path / "people.csv"
    people.write_text(
        "Name,Phone,City\nAda,+12025550191,Berlin\nAlan,+12025550192,Paris\n", encoding="utf-8"
    )
    ws.run("contacts", "import", str(people), "--list", "customers")
    picture = ws.path / "Sale.png"
    picture.write_bytes(png(32, 32))
    media = ws.run("media", "upload", str(picture), "--json").json()
    unused = ws.run("media", "uses", str(media["id"])).output
    assert "is used by no campaign" in unused, unused

    campaign_file = ws.path / "sale.toml"
    campaign_file.write_text(
        'name = "Spring sale"\nlist = "customers"\n\n[message]\ntype = "media"\n'
        f'media_url = "{media["url"]}"\ncaption = "Our sale"\n\n[schedule]\n'
        'start = "2030-04-01T09:00:00"\ntimezone = "UTC"\n',
        encoding="utf-8",
    )
    campaign = ws.run("campaign", "create", str(campaign_file), "--json").json()
    uses = ws.run("media", "uses", str(media["id"]), "--json").json()["uses"]
    assert [(u["campaign_id"], u["keeps"]) for u in uses] == [(campaign["id"], True)], uses
    assert "Spring sale" in ws.run("media", "uses", str(media["id"])).output
    refused = ws.run("media", "delete", str(media["id"]), ok=False)
    assert refused.code == 1 and "'Spring sale'" in refused.output, refused.output
    assert len(ws.run("media", "list", "--json").json()["items"]) == 1
    ws.run("campaign", "delete", str(campaign["id"]))
    assert "deleted" in ws.run("media", "delete", str(media["id"])).output
    assert ws.run("media", "list", "--json").json()["items"] == []
    gone = ws.run("media", "delete", str(media["id"]), ok=False)
    assert gone.code == 1 and "not found" in gone.output, gone.output

    created = ws.run("segment", "create", "berlin", "--list", "customers", "--where", "city=Berlin")
    assert "1 recipient" in created.output, created.output
    edited = ws.run("segment", "edit", "berlin", "--list", "customers").output
    assert "2 recipients" in edited, edited
    shown = ws.run("segment", "show", "berlin", "--json").json()
    assert shown["count"]["recipients"] == 2 and not shown["definition"]["where"], shown
    nobody = ws.run("segment", "edit", "berlin", "--where", "city=Rome", ok=False)
    assert nobody.code == 1, nobody.output
    assert ws.run("segment", "show", "berlin", "--json").json()["count"]["recipients"] == 2
    missing = ws.run("segment", "edit", "nope", "--list", "customers", ok=False)
    assert missing.code == 1 and "no segment called 'nope'" in missing.output, missing.output
