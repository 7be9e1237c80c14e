"""The kill suite's operator: gatecast driven as a user runs it, judged by the sandbox.

A :class:`Run` is a ``gatecast sandbox`` process (its own seed, status delays, a share of
recipients replying STOP), a workspace where the operator links senders, imports a
spreadsheet of contacts and creates a campaign with the CLI, and the ``gatecast`` process
that sends it and receives the gateway's webhook (``serve``; :func:`start_service` is the
one switch to ``receive`` + ``worker`` once they exist). A scenario disturbs it (a
database lock, PostgreSQL away, faults, kills) while events and replies flow; then
:meth:`Run.verdict` compares the sandbox's own record (``/sandbox/messages``,
``/sandbox/stats``) with what gatecast reports (``report --output FILE.json``):

* every STOP the sandbox posted opted its contact out;
* every row is in the state the sandbox last posted for its message (``sent``,
  ``delivered``, ``read``, ``failed``);
* no recipient got two messages (``recipients_with_several`` is empty).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import select
import socket
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.journeys.harness import (
    GATECAST,
    SAMPLES,
    Process,
    Server,
    Workspace,
    start_sandbox,
    wait_for,
    workspace,
)

SECRET = "kill-suite-webhook-secret-0123456789"
#: the operator's settings: the webhook's secret, a gateway that has not answered in 5 s
#: counts as not answering
OPERATOR = {"GATECAST_WEBHOOK_SECRET": SECRET, "GATECAST_HTTP_TIMEOUT_SECONDS": "5"}
#: a row claimed by a killed worker counts as lost (``unknown``) after 20 s, not 120 s
OPERATOR["GATECAST_DISPATCH_LEASE_SECONDS"] = "20"
#: the intake outlives a killed or stopped ``serve`` and waits for the next (the harness's
#: default, 0, stops it with ``serve``); the workspace stops it at the end
OPERATOR["GATECAST_INTAKE_LINGER"] = "300"
#: how long an ``unknown`` row waits for evidence before ``retry --unknown`` resends it
SETTLE_SECONDS = 8.0
OPERATOR["GATECAST_UNKNOWN_SETTLE_SECONDS"] = str(SETTLE_SECONDS)
#: the sandbox's status names -> the delivery state gatecast shows for them
TRUE_STATE = {"pending": "sent", "sent": "sent", "delivered": "delivered"}
TRUE_STATE.update(read="read", played="read", failed="failed")


def contacts_csv(path: Path, count: int) -> Path:
    """A spreadsheet of ``count`` contacts with distinct valid US numbers."""
    lines = ["Name,Phone,City"]
    lines += [f"Person {i},+1 202 555 {1000 + i:04d},Washington" for i in range(count)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def campaign_file(path: Path, per_minute: int) -> Path:
    """The sample campaign at ``per_minute`` with no random gaps, retried after 1 s."""
    text = (SAMPLES / "campaign.toml").read_text(encoding="utf-8")
    text = text.replace("per_minute = 20", f"per_minute = {per_minute}")
    text = text.replace("delay_seconds = [5, 15]", "delay_seconds = [0, 0]")
    text = text.replace("daily_cap = 500", "daily_cap = 100000")
    text = text.replace("max_attempts = 4", "max_attempts = 6\nbackoff_seconds = 1")
    path.write_text(text, encoding="utf-8")
    return path


def service_commands() -> list[str]:
    """The commands that split ``serve`` into its receiver and dispatcher, when this
    gatecast has them: ``gatecast --help`` names them."""
    listed = subprocess.run(
        [str(GATECAST), "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "200"},
        check=False,
    ).stdout
    return [c for c in ("receive", "worker") if f" {c} " in listed]


def require_split_service() -> None:
    """Skip (naming what is missing) unless ``gatecast receive`` and ``gatecast worker``
    exist: the scenarios that kill the dispatcher apart from the receiver need them."""
    missing = sorted({"receive", "worker"} - set(service_commands()))
    if missing:
        pytest.skip(
            "needs the split service: `gatecast "
            + "` and `gatecast ".join(missing)
            + "` not in this gatecast (issue 13 item 1)"
        )


@dataclass
class Run:
    """One operator's run: the sandbox, the workspace, the campaign and its service."""

    ws: Workspace
    sandbox: Process
    campaign_id: int
    recipients: int
    senders: list[str]
    server: Server | None = None
    gateway: httpx.Client = field(default_factory=lambda: httpx.Client(timeout=60))
    #: recipients (digits) whose event was lost with a request in flight when the process
    #: answering it was SIGKILLed: counted and stated, not judged (:meth:`lost_posts`)
    excused: set[str] = field(default_factory=set)

    @property
    def hook(self) -> str:
        """The webhook URL the service registered."""
        assert self.server is not None
        return f"{self.server.url}/webhooks/gateway/{SECRET}"

    def serve(self) -> Server:
        """Start ``gatecast serve`` (the receiver, scheduler and dispatcher)."""
        self.server = self.ws.serve()
        return self.server

    def receive(self, port: int) -> Process:
        """Start ``gatecast receive --port PORT`` until it says it receives (a receiver
        already serving the workspace hands its socket over and exits)."""
        proc = self.ws.spawn("receive", "--port", str(port))
        marker = "gatecast receiving on "
        wait_for(
            lambda: marker in proc.output() or proc.popen.poll() is not None,
            timeout=60,
            what="gatecast receive serving",
        )
        assert marker in proc.output(), proc.output()
        return proc

    def sandbox_get(self, route: str, **params: Any) -> Any:
        """A ``/sandbox/...`` inspection route of the sandbox."""
        res = self.gateway.get(f"{self.sandbox.url}/sandbox/{route}", params=params)
        res.raise_for_status()
        return res.json()

    def failed_posts(self) -> list[str]:
        """The webhook POSTs the sandbox could not deliver: when, what, and why (not the
        events it had no webhook for: the connection event of a link before any)."""
        failed, since = [], 0
        while True:
            page = self.sandbox_get("events", since=since, limit=1000)
            failed += [
                f"{e['at']} {e['event']} {e['status']}: {e['error']}"
                for e in page["events"]
                if e["delivered"] is False and e["error"] != "no webhook"
            ]
            if not page["events"]:
                return failed
            since = page["next"]

    def lost_posts(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The webhook POSTs the sandbox could not deliver, as (refused, cut): a refused
        connection (nobody listening), or any other failure (a request in flight when the
        process answering it was killed, a timeout). The recipients of the cut ones are
        :attr:`excused` from the verdict."""
        failed, since = [], 0
        while True:
            page = self.sandbox_get("events", since=since, limit=1000)
            failed += [
                e
                for e in page["events"]
                if e["delivered"] is False and e["error"] not in ("no webhook", "instance gone")
            ]
            if not page["events"]:
                break
            since = page["next"]
        refused = [e for e in failed if e["error"] == "ConnectError"]
        cut = [e for e in failed if e["error"] != "ConnectError"]
        phones = {m["message_id"]: m["to"] for m in self.sandbox_get("messages")}
        for e in cut:
            chat = str((e.get("body") or {}).get("data", {}).get("chat", ""))
            phone = phones.get(e["message_id"]) or chat.split("@", 1)[0]
            if phone:
                self.excused.add(phone)
        return refused, cut

    def accepted(self) -> int:
        """How many sends the sandbox accepted so far."""
        return int(self.sandbox_get("stats")["accepted"])

    def wait_accepted(self, count: int, timeout: float = 120) -> None:
        """Until the sandbox accepted ``count`` sends."""
        wait_for(lambda: self.accepted() >= count, timeout=timeout, what=f"{count} sends")

    def show(self) -> dict[str, Any]:
        """``campaign show ID --json``."""
        shown = self.ws.run("campaign", "show", str(self.campaign_id), "--json").json()
        assert isinstance(shown, dict)
        return shown

    def report(self) -> list[dict[str, Any]]:
        """Every row of ``report ID --output FILE.json``."""
        out = self.ws.path / "report.json"
        self.ws.run("report", str(self.campaign_id), "--output", str(out))
        rows = json.loads(out.read_text(encoding="utf-8"))["deliveries"]
        assert isinstance(rows, list)
        return rows

    def truth(self) -> dict[str, dict[str, Any]]:
        """The sandbox's record: its last message to each recipient (digits)."""
        return {m["to"]: m for m in self.sandbox_get("messages")}

    def mismatches(self, unknown_ok: bool = False) -> list[str]:
        """The rows whose state is not the sandbox's truth (empty: all reached it)."""
        truth = self.truth()
        wrong = []
        for row in self.report():
            digits = row["target"].lstrip("+")
            if digits in self.excused:
                continue
            msg = truth.get(digits)
            if msg is None:
                if not (unknown_ok and row["state"] == "unknown"):
                    wrong.append(f"{row['target']}: {row['state']}, never reached the gateway")
                continue
            want = TRUE_STATE[msg["status"]]
            if row["state"] != want or row["message_id"] != msg["message_id"]:
                wrong.append(
                    f"{row['target']}: {row['state']} {row['message_id']}, the gateway "
                    f"says {want} {msg['message_id']}"
                )
        return wrong

    def settled(self, timeout: float = 120, unknown_ok: bool = False) -> None:
        """Until the campaign completed, the sandbox posted every event and every row
        reached the sandbox's truth (or the timeout, then the differences are shown)."""
        wait_for(
            lambda: self.show()["state"] == "completed",
            timeout=timeout,
            every=1,
            what=f"the campaign completed ({self.ws.path})",
        )
        completed = time.monotonic()
        idle = self.sandbox_get("idle", timeout=min(timeout, 60))
        assert idle["idle"], idle
        deadline = time.monotonic() + timeout
        wrong = self.mismatches(unknown_ok)
        while wrong and time.monotonic() < deadline:
            time.sleep(2)
            wrong = self.mismatches(unknown_ok)
        assert not wrong, f"{len(wrong)} row(s) behind the gateway's truth: {wrong[:10]}"
        print(f"settled {time.monotonic() - completed:.1f} s after the campaign completed")

    def resend_unknown(self) -> tuple[int, dict[str, Any]]:
        """What the docs tell an operator to do once the campaign settled: ``campaign retry
        ID --unknown`` after the settle period. Returns how many rows were ``unknown``
        (none of them with evidence: :meth:`settled` ``unknown_ok``) and retry's answer;
        each of them must be resent (``requeued``), none left alone."""
        self.settled(unknown_ok=True)
        unknown = sum(1 for r in self.report() if r["state"] == "unknown")
        if not unknown:
            return 0, {}
        time.sleep(SETTLE_SECONDS)
        retry = ["campaign", "retry", str(self.campaign_id), "--unknown", "--json"]
        answer = self.ws.run(*retry).json()
        assert answer["requeued"] == unknown and answer["left_alone"] == 0, answer
        return unknown, dict(answer)

    def verdict(self, unknown_ok: bool = False) -> dict[str, int]:
        """The kill suite's three checks; returns the figures for the docs."""
        self.settled(unknown_ok=unknown_ok)
        stats = self.sandbox_get("stats")
        assert stats["recipients_with_several"] == [], stats["recipients_with_several"]
        rows = self.report()
        assert len(rows) == self.recipients
        stops = {m["to"] for m in self.truth().values() if m["replied"] == "STOP"}
        assert stops, "the sandbox sent no STOP: make the run larger"
        stops -= self.excused
        opted = {r["target"].lstrip("+") for r in rows if r["opted_out"] is True}
        assert stops <= opted, f"STOPs not opted out: {sorted(stops - opted)}"
        states = Counter(r["state"] for r in rows)
        figures = {"rows": len(rows), "stops": len(stops), **states}
        figures["webhook_posts"] = int(stats["webhook_delivered"])
        figures["webhook_failed"] = int(stats["webhook_failed"])
        print(f"nothing lost: {json.dumps(figures)}")
        return figures


@contextlib.contextmanager
def operator_run(
    tmp_path: Path,
    *,
    recipients: int,
    per_minute: int,
    sandbox_args: tuple[str, ...] = (),
    senders: int = 1,
    **settings: str,
) -> Iterator[Run]:
    """A sandbox, a workspace with linked senders, the contacts imported and the campaign
    created (it starts when a service runs); ``settings`` are GATECAST_* variables."""
    sandbox = start_sandbox(tmp_path / "sandbox", *sandbox_args)
    try:
        with workspace(tmp_path / "work", sandbox.url, **{**OPERATOR, **settings}) as ws:
            ws.run("db", "upgrade")
            linked = [ws.link_sender() for _ in range(senders)]
            people = contacts_csv(ws.path / "contacts.csv", recipients)
            ws.run("contacts", "import", str(people), "--list", "customers")
            path = campaign_file(ws.path / "campaign.toml", per_minute)
            campaign_id = int(ws.run("campaign", "create", str(path), "--json").json()["id"])
            run = Run(ws, sandbox, campaign_id, recipients, linked)
            try:
                yield run
            finally:
                run.gateway.close()
    finally:
        sandbox.stop()


class TcpCut:
    """A TCP proxy in front of PostgreSQL that the test can cut: while cut, every open
    connection is closed and new ones are refused, as when the server is away."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._lock = threading.Lock()
        self._open: list[socket.socket] = []
        self._cut = False
        self._stop = False
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._stop:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self._cut:
                client.close()
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._open += [client, upstream]
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()

    def _pump(self, a: socket.socket, b: socket.socket) -> None:
        pair = {a: b, b: a}
        try:
            while not self._cut:
                ready, _, _ = select.select([a, b], [], [], 0.2)
                for s in ready:
                    data = s.recv(65536)
                    if not data:
                        return
                    pair[s].sendall(data)
        except OSError:
            pass
        finally:
            for s in (a, b):
                with contextlib.suppress(OSError):
                    s.close()

    def cut(self) -> None:
        """PostgreSQL away: close every connection, refuse new ones."""
        self._cut = True
        with self._lock:
            for s in self._open:
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
            self._open.clear()

    def mend(self) -> None:
        """PostgreSQL back."""
        self._cut = False

    def close(self) -> None:
        """Stop the proxy."""
        self._stop = True
        self.cut()
        self._listener.close()


#: held (flock, exclusive) by whoever stops the shared PostgreSQL server
PG_RESTART_LOCK = Path("/tmp/gatecast-pg-restart.lock")


def _cluster(port: int) -> tuple[str, str]:
    """The (version, name) of the local PostgreSQL cluster listening on ``port``."""
    listed = subprocess.run(
        ["pg_lsclusters", "--no-header"], capture_output=True, text=True, check=True
    ).stdout
    for line in listed.splitlines():
        version, name, cluster_port, *_ = line.split()
        if int(cluster_port) == port:
            return version, name
    raise AssertionError(f"no local PostgreSQL cluster on port {port}:\n{listed}")


@contextlib.contextmanager
def postgres_stopped(port: int) -> Iterator[None]:
    """The PostgreSQL server on ``port`` stopped (fast: its connections are cut) for the
    block, then started again; under an exclusive flock on :data:`PG_RESTART_LOCK`."""
    version, name = _cluster(port)
    ctl = ["pg_ctlcluster", "--skip-systemctl-redirect", version, name]
    with PG_RESTART_LOCK.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        subprocess.run([*ctl, "stop"], check=True, timeout=60)
        try:
            yield
        finally:
            subprocess.run([*ctl, "start"], check=True, timeout=60)
            wait_for(
                lambda: subprocess.run(["pg_isready", "-q", "-p", str(port)]).returncode == 0,
                timeout=60,
                what="PostgreSQL back",
            )


def free_port() -> int:
    """A TCP port free on this machine now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
