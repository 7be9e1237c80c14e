"""The webhook receiver is a process of its own: neither a crash of the worker nor a
rolling restart of the receiver loses an event the gateway posts.

* ``gatecast serve`` is SIGKILLed in the middle of a campaign while the sandbox posts
  statuses and STOP replies: its intake (the supervisor it started in a session of its
  own, and its handler) keeps answering the gateway and applying the events while the
  API answers 503; the next ``serve`` adopts the intake (the same socket, its handler
  restarted); in the end every row the gateway reported is at the gateway's truth, every
  STOP opted its contact out and no recipient got a message twice.
* The intake's handler is SIGKILLed: the supervisor starts another at once and a client
  asking meanwhile waits, it is never refused.
* ``gatecast receive`` is restarted in rolling fashion (a new one started in the folder,
  the old one exits) while the gateway posts: every POST answers 200, every event is
  applied.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import psutil

from gatecast.intake.supervisor import request
from tests.journeys.harness import (
    SAMPLES,
    Process,
    Workspace,
    pid_alive,
    start_sandbox,
    wait_for,
    workspace,
)
from tests.journeys.test_senders import _campaign

SECRET = "journey-webhook-secret-0123456789"
#: a pace that keeps the campaign sending for about ten seconds
PACE = {
    "per_minute = 20": "per_minute = 300",
    "delay_seconds = [5, 15]": "delay_seconds = [0.1, 0.3]",
}


def _sandbox(path: Path) -> Process:
    # events spread over seconds after each send, a quarter of the recipients answer STOP
    return start_sandbox(path, "--status-delays", "0.5,1.5,3", "--stop-rate", "0.25")


def _truth(sandbox_url: str) -> list[dict[str, Any]]:
    messages = httpx.get(f"{sandbox_url}/sandbox/messages", timeout=10).json()
    assert isinstance(messages, list)
    return messages


def _stats(sandbox_url: str) -> dict[str, Any]:
    stats = httpx.get(f"{sandbox_url}/sandbox/stats", timeout=10).json()
    assert isinstance(stats, dict)
    return stats


def _idle(sandbox_url: str) -> bool:
    return bool(httpx.get(f"{sandbox_url}/sandbox/idle?timeout=5", timeout=10).json()["idle"])


def _rows(api: httpx.Client, campaign_id: int) -> dict[str, dict[str, Any]]:
    page = api.get(f"/api/v1/campaigns/{campaign_id}/deliveries", params={"limit": 500}).json()
    return {r["message_id"]: r for r in page["items"] if r["message_id"]}


def _behind(api: httpx.Client, campaign_id: int, truth: list[dict[str, Any]]) -> list[str]:
    """The gateway's messages gatecast recorded whose row is not at the gateway's truth,
    and the STOP answers whose contact is not opted out."""
    rows = _rows(api, campaign_id)
    behind = [
        f"{m['message_id']}: {rows[m['message_id']]['state']} != {m['status']}"
        for m in truth
        if m["message_id"] in rows and rows[m["message_id"]]["state"] != m["status"]
    ]
    for m in truth:
        if m["replied"] == "STOP":
            phone = "+" + m["to"]
            page = api.get("/api/v1/contacts", params={"q": phone}).json()["items"]
            if [c["opted_out"] for c in page if c["phone"] == phone] != [True]:
                behind.append(f"{phone} answered STOP, not opted out")
    return behind


def _launch(ws: Workspace, **pace: str) -> tuple[str, int]:
    sender = ws.link_sender()
    ws.run("contacts", "import", str(SAMPLES / "contacts.csv"), "--list", "customers")
    return sender, _campaign(ws, **pace)


def _behind_in_report(ws: Workspace, campaign_id: int, truth: list[dict[str, Any]]) -> list[str]:
    """:func:`_behind` read from ``report --output`` (the CLI: the API is down meanwhile)."""
    out = ws.path / "report.json"
    ws.run("report", str(campaign_id), "--output", str(out))
    rows = {r["message_id"]: r for r in json.loads(out.read_text())["deliveries"]}
    behind = [
        f"{m['message_id']}: {rows[m['message_id']]['state']} != {m['status']}"
        for m in truth
        if m["message_id"] in rows and rows[m["message_id"]]["state"] != m["status"]
    ]
    opted = {r["target"] for r in rows.values() if r["opted_out"] is True}
    stops = {"+" + m["to"] for m in truth if m["replied"] == "STOP"}
    return behind + [f"{phone} answered STOP, not opted out" for phone in stops - opted]


def test_a_killed_serve_leaves_its_intake_receiving_and_the_next_serve_adopts_it(
    tmp_path: Path,
) -> None:
    sandbox = _sandbox(tmp_path / "sandbox")
    try:
        with workspace(
            tmp_path / "work",
            sandbox.url,
            GATECAST_WEBHOOK_SECRET=SECRET,
            GATECAST_INTAKE_LINGER="120",
        ) as ws:
            _sender, campaign_id = _launch(ws, **PACE)
            server = ws.serve()
            intake = ws.intake()
            assert intake is not None and intake.url == server.url
            assert server.process.popen.pid not in (intake.pid, intake.handler)  # its own
            wait_for(lambda: len(_truth(sandbox.url)) >= 8, timeout=60, what="sends under way")

            server.process.kill()  # SIGKILL mid-campaign, events still to come
            sent_by_the_dead = len(_truth(sandbox.url))
            assert ws.intake() == intake  # the intake stayed up
            # the API and dashboard went with serve's web process: 503, retry later
            with server.api() as api:
                gone = wait_for(
                    lambda: (r := api.get("/api/v1/campaigns")).status_code == 503 and r,
                    timeout=30,
                    what="the API answering 503",
                )
                assert gone.headers["retry-after"] == "5"
                assert api.get("/healthz").json() == {"status": "ok"}  # the intake's
            wait_for(lambda: _idle(sandbox.url), timeout=30, what="the gateway's events")
            truth = _truth(sandbox.url)
            assert len(truth) == sent_by_the_dead  # nothing sends while serve is down
            assert any(m["replied"] == "STOP" for m in truth), truth
            # every event posted while serve was down was received and applied
            wait_for(
                lambda: not _behind_in_report(ws, campaign_id, truth),
                timeout=30,
                what="the events applied by the intake alone",
            )
            assert _stats(sandbox.url)["webhook_failed"] == 0

            again = ws.serve()
            assert again.url == server.url  # the same socket, never closed
            assert "kept receiving" in again.process.output()
            assert "its handler runs this version" in again.process.output()  # no upgrade
            assert ws.intake() == intake
            # a restart on new code (what an upgrade asks): a new handler, then the old stops
            restarted = request(ws.state_folder, "restart", timeout=120)
            assert restarted is not None and restarted["ok"] is True, restarted
            adopted = ws.intake()
            assert adopted is not None and adopted.pid == intake.pid
            assert adopted.handler == restarted["handler"] != intake.handler
            wait_for(lambda: not pid_alive(intake.handler), timeout=30, what="the old handler")

            with again.api() as api:

                def finished() -> bool:
                    shown = api.get(f"/api/v1/campaigns/{campaign_id}").json()
                    return int(shown["counts"].get("queued", 0)) == 0 and _idle(sandbox.url)

                wait_for(finished, timeout=90, what="the campaign sent")
                truth = _truth(sandbox.url)
                wait_for(
                    lambda: not _behind(api, campaign_id, truth),
                    timeout=30,
                    what="every row at the gateway's truth",
                )
            stats = _stats(sandbox.url)
            assert stats["recipients_with_several"] == []  # 0 duplicate sends
            assert stats["webhook_failed"] == 0
            assert again.stop() == 0
            assert ws.intake() == adopted  # a restart of serve keeps the intake up
            assert "stopped" in ws.run("stop").output  # the documented way to stop it all
            assert ws.intake() is None
            wait_for(lambda: not pid_alive(adopted.pid), timeout=30, what="the intake")
            assert "Traceback" not in again.process.output()
            assert "Traceback" not in server.process.output()
    finally:
        sandbox.stop()


def _status(instance_id: str, message_id: str, status: str) -> dict[str, Any]:
    return {
        "event": "message_status",
        "instance_id": instance_id,
        "data": {"id": message_id, "status": status, "timestamp": int(time.time())},
    }


def _stop_reply(instance_id: str, phone: str, message_id: str) -> dict[str, Any]:
    return {
        "event": "message",
        "instance_id": instance_id,
        "data": {"id": message_id, "chat": f"{phone[1:]}@s.whatsapp.net", "text": "STOP"},
    }


def _wait_receiving(proc: Process, timeout: float = 60.0) -> str:
    marker = "gatecast receiving on "
    return str(
        wait_for(
            lambda: marker in proc.output() and proc.output().split(marker, 1)[1].split()[0],
            timeout=timeout,
            what="gatecast receive serving",
        )
    )


def test_a_rolling_restart_of_the_receiver_loses_no_event(tmp_path: Path) -> None:
    sandbox = start_sandbox(tmp_path / "sandbox", "--status-delays", "0.05,0.1,0.2")
    try:
        with workspace(tmp_path / "work", sandbox.url, GATECAST_WEBHOOK_SECRET=SECRET) as ws:
            sender, campaign_id = _launch(ws)
            ws.run("campaign", "run", str(campaign_id), timeout=180)
            first = ws.spawn("receive", "--port", "0")
            url = _wait_receiving(first)
            hook = f"{url}/webhooks/gateway/{SECRET}"
            with httpx.Client(base_url=url, timeout=30) as api:
                api.headers["Authorization"] = f"Bearer {ws.env()['GATECAST_API_KEY']}"
                rows = list(_rows(api, campaign_id).values())
            assert len(rows) >= 20, rows
            # the gateway posts, one connection per event, across the restart
            bodies = [_status(sender, r["message_id"], "read") for r in rows]
            stopper = rows[len(rows) // 2]["target"]
            bodies.insert(len(bodies) // 2, _stop_reply(sender, stopper, "stop-rolling-1"))
            answers: list[int | str] = []
            enough = threading.Event()

            def gateway() -> None:
                limits = httpx.Limits(max_keepalive_connections=0)
                with httpx.Client(timeout=30, limits=limits) as client:
                    # again and again until told (duplicates change nothing), each at least once
                    while not enough.is_set() or len(answers) < len(bodies):
                        body = bodies[len(answers) % len(bodies)]
                        try:
                            answers.append(client.post(hook, json=body).status_code)
                        except httpx.HTTPError as exc:
                            answers.append(repr(exc))
                        time.sleep(0.01)

            poster = threading.Thread(target=gateway)
            poster.start()
            wait_for(lambda: len(answers) > 2, timeout=60, what="POSTs to the old receiver")
            second = ws.spawn("receive", "--port", "0")  # the rolling restart
            assert _wait_receiving(second) == url
            wait_for(lambda: first.popen.poll() is not None, timeout=60, what="the old receiver")
            assert first.popen.returncode == 0
            posted_to_the_old = len(answers)
            wait_for(
                lambda: len(answers) > posted_to_the_old + 2,
                timeout=60,
                what="POSTs answered by the new receiver",
            )
            enough.set()
            poster.join(120)
            assert len(answers) > posted_to_the_old > 0
            assert answers == [200] * len(answers), [a for a in answers if a != 200]
            assert "handed over" in first.output()

            with httpx.Client(base_url=url, timeout=30) as api:
                api.headers["Authorization"] = f"Bearer {ws.env()['GATECAST_API_KEY']}"
                wait_for(
                    lambda: all(r["state"] == "read" for r in _rows(api, campaign_id).values()),
                    timeout=30,
                    what="every status applied",
                )
                page = api.get("/api/v1/contacts", params={"q": stopper}).json()["items"]
                assert [c["opted_out"] for c in page if c["phone"] == stopper] == [True]
            assert second.stop() == 0
            assert ws.receiver() is None
    finally:
        sandbox.stop()


def test_receive_and_worker_run_as_two_services(tmp_path: Path) -> None:
    sandbox = start_sandbox(tmp_path / "sandbox", "--status-delays", "0.05,0.1,0.2")
    try:
        with workspace(tmp_path / "work", sandbox.url, GATECAST_WEBHOOK_SECRET=SECRET) as ws:
            sender, campaign_id = _launch(ws)
            receiver = ws.spawn("receive", "--port", "0")
            url = _wait_receiving(receiver)
            worker = ws.spawn("worker")
            # the worker registers the running receiver's address (no GATECAST_PUBLIC_URL)
            instance = wait_for(
                lambda: [
                    i
                    for i in httpx.get(f"{sandbox.url}/sandbox/instances", timeout=10).json()
                    if i["instance_id"] == sender and i["webhook_url"]
                ],
                timeout=60,
                what="the webhook registered by the worker",
            )[0]
            assert instance["webhook_url"] == f"{url}/***"
            with httpx.Client(base_url=url, timeout=30) as api:
                api.headers["Authorization"] = f"Bearer {ws.env()['GATECAST_API_KEY']}"

                def all_read() -> bool:
                    shown = api.get(f"/api/v1/campaigns/{campaign_id}").json()
                    rows = _rows(api, campaign_id).values()
                    return shown["state"] == "completed" and all(r["state"] == "read" for r in rows)

                wait_for(all_read, timeout=90, what="the campaign sent and read")
            assert "GATECAST_PUBLIC_URL is not set" in worker.output()
            assert "no HTTP" in worker.output()
            assert worker.stop() == 0
            assert receiver.popen.poll() is None  # the worker's stop is not the receiver's
            assert receiver.stop() == 0
            assert ws.receiver() is None
    finally:
        sandbox.stop()


def test_a_killed_intake_handler_is_replaced_at_once_and_no_connection_is_refused(
    ws: Workspace,
) -> None:
    server = ws.serve()
    first = ws.intake()
    assert first is not None
    refused: list[str] = []
    answers: list[int] = []
    done = threading.Event()

    def poll() -> None:  # a client asking all along: it waits, it is never refused
        with httpx.Client(timeout=60) as client:
            while not done.is_set():
                try:
                    answers.append(client.get(f"{server.url}/healthz").status_code)
                except httpx.ConnectError as exc:
                    refused.append(repr(exc))
                time.sleep(0.02)

    poller = threading.Thread(target=poll)
    poller.start()
    try:
        os.kill(first.handler, signal.SIGKILL)  # the handler crashes; the socket stays
        again = wait_for(
            lambda: (r := ws.intake()) is not None and r.handler != first.handler and r,
            timeout=60,
            what="a new handler started by the supervisor",
        )
        wait_for(lambda: answers[-3:] == [200] * 3, timeout=60, what="answers again")
    finally:
        done.set()
        poller.join()
    assert refused == []
    assert again.pid == first.pid and again.url == server.url
    assert f"handler {first.handler} exited (-9); its spare" in server.process.output()
    # the web process dies: the API answers 503 meanwhile, serve starts another
    web = [c for c in psutil.Process(server.process.popen.pid).children() if "web" in c.cmdline()]
    assert len(web) == 1
    web[0].kill()
    wait_for(
        lambda: "the web process exited" in server.process.output(),
        timeout=30,
        what="serve noticing",
    )
    with server.api() as api:
        wait_for(
            lambda: api.get("/api/v1/campaigns").status_code == 200,
            timeout=60,
            what="the API back",
        )
    assert server.stop() == 0
    wait_for(lambda: ws.intake() is None, timeout=30, what="the intake (linger 0) stopping")


def test_a_sigterm_while_serve_starts_stops_its_intake_too(ws: Workspace) -> None:
    # the intake has started; serve may still be starting its worker: with linger 0 a stop
    # now must not leave the intake serving on its own
    proc = ws.spawn("serve", "--port", "0")
    intake = wait_for(ws.intake, timeout=60, what="serve's intake")
    proc.popen.send_signal(signal.SIGTERM)
    assert proc.popen.wait(60) == 0, proc.output()
    wait_for(lambda: not pid_alive(intake.pid), timeout=60, what="the intake to stop")
    assert not pid_alive(intake.handler)
    assert ws.intake() is None
