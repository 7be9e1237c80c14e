"""Hostile uploads cost a child process, never the service (issue 28, item 3).

One ``gatecast serve`` receives the gateway's webhook posts all along, while every
hostile file (:mod:`tests.hostile_files`: the far-cell workbook and its column-T variant,
a zip bomb, a huge header, a huge cell, a file that is not a workbook, the far cell in an
ODS) goes through the API's preview and import, the dashboard's upload (the same routes
with a signed-in session, as its page calls them) and ``gatecast contacts import``:

- every file is refused with its reason naming the file (422 problems on the web, an
  error line and exit code 1 on the command line), and nothing is stored;
- the concurrent event stream sees 0 failed posts;
- the peak memory (VmHWM: the kernel's high-water mark of resident memory) of every
  gatecast process of the run, the server, its receiver, the children that read the
  workbooks and the CLI, is printed and bounded: each stays under
  :data:`PEAK_BOUND_MB` (the workbooks are read with a 128 MiB limit here).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from tests.hostile_files import Hostile, hostile_files
from tests.journeys.harness import (
    API_KEY,
    Process,
    Server,
    Workspace,
    assert_nothing_leaked,
    assert_problem,
    workspace,
)

SECRET = "journey-webhook-secret-0123456789"
PARSE_MEMORY = 128 * 1024 * 1024
#: the most resident memory any one gatecast process may reach during the run, in MB
#: (measured: the receiver about 180 MB, the CLI 135 MB, a reading child up to 230 MB:
#: about 110 MB it starts with, plus its 128 MiB limit; the bound leaves generous
#: headroom; without the child the far cell alone asks for 512 GB)
PEAK_BOUND_MB = 900
DASHBOARD = {"X-Gatecast-Dashboard": "1"}


@dataclass
class Peaks:
    """The high-water mark of resident memory of every process below the test, sampled
    until :meth:`stop` (a process's own VmHWM, so a peak between samples is not missed
    while the process lives)."""

    peaks: dict[int, tuple[str, int]] = field(default_factory=dict)
    done: threading.Event = field(default_factory=threading.Event)

    def sample(self) -> None:
        for proc in psutil.Process().children(recursive=True):
            try:
                with open(f"/proc/{proc.pid}/status", encoding="ascii") as fh:
                    hwm = next(int(x.split()[1]) for x in fh if x.startswith("VmHWM:"))
                name = _label(proc)
            except (OSError, StopIteration, psutil.Error):
                continue
            self.peaks[proc.pid] = (name, max(hwm, self.peaks.get(proc.pid, ("", 0))[1]))

    def run(self) -> None:
        while not self.done.is_set():
            self.sample()
            time.sleep(0.02)

    def report(self) -> str:
        rows = sorted(self.peaks.items(), key=lambda item: -item[1][1])
        return "\n".join(f"{kib / 1024:8.0f} MB  pid {pid}  {name}" for pid, (name, kib) in rows)


def _label(proc: psutil.Process) -> str:
    """What a process is: a forked workbook reader shows its parent's command line."""
    command = " ".join(proc.cmdline())
    parent = proc.parent()
    if parent is not None and " ".join(parent.cmdline()) == command:
        return "workbook reader (forked child)"
    if "multiprocessing.forkserver" in command:
        return "forkserver (starts the workbook readers)"
    if "resource_tracker" in command:
        return "multiprocessing resource tracker"
    words = [Path(w).name if "/" in w else w for w in proc.cmdline()[:4]]
    return " ".join(words)


@dataclass
class Gateway:
    """Posts events to the webhook route, one after another, until stopped."""

    url: str
    answers: list[int | str] = field(default_factory=list)
    done: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        with httpx.Client(timeout=10) as client:
            n = 0
            while not self.done.is_set():
                n += 1
                body = {
                    "event": "message_status",
                    "instance_id": "HOSTILE0001",
                    "data": {"id": f"hostile-{n}", "status": "read", "timestamp": int(time.time())},
                }
                try:
                    self.answers.append(client.post(self.url, json=body).status_code)
                except httpx.HTTPError as exc:
                    self.answers.append(repr(exc))
                time.sleep(0.02)

    def failed(self) -> list[int | str]:
        return [a for a in self.answers if a != 200]


@pytest.fixture(scope="module")
def served(
    tmp_path_factory: pytest.TempPathFactory, sandbox_process: Process
) -> Iterator[tuple[Workspace, Server]]:
    """One ``gatecast serve`` for the module, reading workbooks within 128 MiB."""
    with workspace(
        tmp_path_factory.mktemp("hostile-uploads"),
        sandbox_process.url,
        GATECAST_WEBHOOK_SECRET=SECRET,
        GATECAST_IMPORT_PARSE_MEMORY_BYTES=str(PARSE_MEMORY),
    ) as ws:
        yield ws, ws.serve()


def _refused(res: httpx.Response, hostile: Hostile) -> None:
    body = assert_problem(res, 422, "invalid_request")
    assert hostile.reason in body["detail"], (hostile.name, body)
    assert_nothing_leaked(res.text)


def _upload(client: httpx.Client, url: str, path: Path, **data: str) -> httpx.Response:
    with path.open("rb") as fh:
        return client.post(url, files={"file": (path.name, fh)}, data=data, timeout=60)


def test_hostile_files_are_refused_on_every_face_while_events_keep_flowing(
    served: tuple[Workspace, Server], tmp_path: Path
) -> None:
    ws, server = served
    files = hostile_files(tmp_path / "files")
    peaks, gateway = Peaks(), Gateway(f"{server.url}/webhooks/gateway/{SECRET}")
    threads = [threading.Thread(target=peaks.run), threading.Thread(target=gateway.run)]
    for thread in threads:
        thread.start()
    started = time.monotonic()
    cli = ThreadPoolExecutor(max_workers=2)  # the command line meanwhile, as another user
    runs = {
        path: cli.submit(ws.run, "contacts", "import", str(path), "--list", "hostile", ok=False)
        for path in files
    }
    try:
        with server.api() as api, httpx.Client(base_url=server.url, timeout=30) as browser:
            signed_in = browser.post("/login", data={"api_key": API_KEY, "next": "/contacts"})
            assert signed_in.status_code == 303, signed_in.text
            browser.headers.update(DASHBOARD)
            for path, hostile in files.items():
                _refused(_upload(api, "/api/v1/imports/preview", path), hostile)
                _refused(_upload(api, "/api/v1/imports", path, list_name="hostile"), hostile)
                for url in ("/api/v1/imports/preview", "/api/v1/imports"):  # the page's calls
                    _refused(_upload(browser, url, path, list_name="hostile"), hostile)
            web_seconds = time.monotonic() - started
            for path, hostile in files.items():
                ran = runs[path].result(timeout=300)
                assert ran.code == 1, ran.output
                assert f"error: {path.parent}/{hostile.reason}" in ran.output or (
                    hostile.reason in ran.output and "error: " in ran.output
                ), (hostile.name, ran.output)
                assert "Traceback" not in ran.output
            page = browser.get("/contacts")
            assert page.status_code == 200  # the dashboard still serves
            contacts: Any = api.get("/api/v1/contacts").json()
            assert contacts["total"] == 0, contacts  # nothing stored
            lists = api.get("/api/v1/lists").json()["items"]
            assert [item for item in lists if item["name"] == "hostile"] == [], lists
            jobs = api.get("/api/v1/imports").json()  # only the CLI's attempts, all failed
            assert {j["status"] for j in jobs} <= {"failed"}, jobs
            assert not [j for j in jobs if j["imported"] or j["updated"]], jobs
            assert api.get("/healthz").status_code == 200
    finally:
        cli.shutdown(wait=True, cancel_futures=True)
        gateway.done.set()
        peaks.done.set()
        for thread in threads:
            thread.join(30)
    peaks.sample()
    print(
        f"\n{len(files)} files x 4 web calls: {web_seconds:.1f} s; with the CLI's runs: "
        f"{time.monotonic() - started:.1f} s"
    )
    print(f"{len(gateway.answers)} webhook posts, {len(gateway.failed())} failed")
    print(f"peak resident memory of every gatecast process (VmHWM):\n{peaks.report()}")
    assert len(gateway.answers) > 20 and gateway.failed() == [], gateway.failed()[:5]
    worst = max(kib for _, kib in peaks.peaks.values()) / 1024
    assert worst < PEAK_BOUND_MB, peaks.report()
    assert server.process.popen.poll() is None, server.process.output()
