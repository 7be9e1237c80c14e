"""The journey harness: gatecast driven only through its public faces.

A journey runs the ``gatecast`` command as a subprocess (as a user types it), talks to
``gatecast serve`` over real HTTP (as an integrator does), and points both at a sandbox
gateway started with ``gatecast sandbox`` (its own process, as the README says). Each
:class:`Workspace` is a fresh folder with its own SQLite file, secrets and settings, the
way a user's working directory is. Time can be injected with ``clock_start``
(``GATECAST_CLOCK_START``), so a start, window or cron occurrence is reached, not waited for.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest

if TYPE_CHECKING:
    from gatecast.runtime.receiver_control import ReceiverInfo

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "samples"
GATECAST = Path(sys.executable).with_name("gatecast")
SANDBOX_TOKEN = "sandbox-token"  # the sandbox's documented built-in token
API_KEY = "journey-api-key-0123456789abcdef"
PROBLEM_JSON = "application/problem+json"
#: where the commands a journey runs keep their bytecode: users' Python writes it, but
#: an environment with ``PYTHONDONTWRITEBYTECODE`` (as CI's may be) would have every
#: command compile gatecast's modules again (about 0.08 s of CPU a command); a folder
#: of its own, so no source tree is written (Python validates each file against its source)
PYCACHE = Path(tempfile.gettempdir()) / f"gatecast-journeys-pycache-{os.getuid()}"


class JourneyError(AssertionError):
    """A face did not answer as a user would expect (the output is in the message)."""


def _base_env() -> dict[str, str]:
    """The user's environment without any GATECAST_ setting of the developer's own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GATECAST_")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(PYCACHE)
    env["PYTHONUNBUFFERED"] = "1"
    env["COLUMNS"] = "200"  # rich tables unwrapped, as on a wide terminal
    env["NO_COLOR"] = "1"
    env["TERM"] = "dumb"
    return env


@dataclass
class Process:
    """A long-running gatecast process (``sandbox``, ``serve``) with its output kept."""

    popen: subprocess.Popen[str]
    log_path: Path
    url: str = ""

    def output(self) -> str:
        """Everything the process printed so far."""
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30.0) -> int:
        """Ask it to stop (SIGTERM, as a service manager does) and wait."""
        if self.popen.poll() is None:
            self.popen.send_signal(sig)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(10)
        return int(self.popen.returncode)

    def kill(self) -> None:
        """SIGKILL: a crash."""
        if self.popen.poll() is None:
            self.popen.kill()
            self.popen.wait(10)


def _spawn(args: Sequence[str], env: dict[str, str], cwd: Path, log_path: Path) -> Process:
    log = log_path.open("w", encoding="utf-8")
    popen = subprocess.Popen(  # a user's command, in its own process
        [str(GATECAST), *args],
        cwd=cwd,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    log.close()
    return Process(popen, log_path)


#: the sandbox options journeys run with unless they need others: status events come quickly
QUICK_STATUSES = ("--status-delays", "0.05,0.1,0.2")


def start_sandbox(workdir: Path, *args: str, timeout: float = 30.0) -> Process:
    """``gatecast sandbox --port 0 --auto-link ARGS`` until it says where it listens."""
    workdir.mkdir(parents=True, exist_ok=True)
    ready = workdir / f"sandbox-ready-{time.monotonic_ns()}"
    argv = ["sandbox", "--port", "0", "--ready-file", str(ready), *args]
    if "--no-auto-link" not in args:
        argv.append("--auto-link")
    proc = _spawn(argv, _base_env(), workdir, workdir / f"{ready.name}.log")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ready.exists() and ready.read_text().strip():
            proc.url = ready.read_text().strip()
            return proc
        if proc.popen.poll() is not None:
            break
        time.sleep(0.05)
    proc.kill()
    raise JourneyError(f"the sandbox did not start:\n{proc.output()}")


@dataclass
class Result:
    """What a CLI command did: its exit code and everything it printed."""

    args: tuple[str, ...]
    code: int
    output: str

    def json(self) -> Any:
        """The output parsed as JSON (commands run with ``--json``)."""
        return json.loads(self.output)


@dataclass
class Workspace:
    """A user's working directory: an SQLite file, settings in the environment."""

    path: Path
    gateway_url: str = ""
    settings: dict[str, str] = field(default_factory=dict)
    clock_start: datetime | None = None
    processes: list[Process] = field(default_factory=list)

    @property
    def database_url(self) -> str:
        """The workspace's database (``GATECAST_DATABASE_URL``)."""
        return self.settings.get("GATECAST_DATABASE_URL", f"sqlite:///{self.path / 'gatecast.db'}")

    def env(self, **extra: str) -> dict[str, str]:
        """The environment a user would have exported (README's walk-through)."""
        env = _base_env()
        env["GATECAST_DATABASE_URL"] = self.database_url
        env["GATECAST_API_KEY"] = API_KEY
        # journeys not about the warm-up send as before it (they set it "true" to test it)
        env["GATECAST_WARMUP_ENABLED"] = "false"
        # the intake stops with its serve (journeys that kill serve set a linger)
        env["GATECAST_INTAKE_LINGER"] = "0"
        if self.gateway_url:
            env["GATECAST_GATEWAY_URL"] = self.gateway_url
            env["GATECAST_ACCESS_TOKEN"] = SANDBOX_TOKEN
        if self.clock_start is not None:
            env["GATECAST_CLOCK_START"] = self.clock_start.isoformat()
        env.update(self.settings)
        env.update(extra)
        return env

    def run(
        self,
        *args: str,
        ok: bool = True,
        timeout: float = 120.0,
        stdin: str | None = None,
        **env: str,
    ) -> Result:
        """Run ``gatecast ARGS`` to its end (``stdin``: what it reads there); ``ok``
        requires exit code 0."""
        try:
            done = subprocess.run(  # a user's command
                [str(GATECAST), *args],
                cwd=self.path,
                env=self.env(**env),
                capture_output=True,
                text=True,
                timeout=timeout,
                **({"input": stdin} if stdin is not None else {"stdin": subprocess.DEVNULL}),
            )
        except subprocess.TimeoutExpired as exc:
            out = f"{exc.stdout!s}{exc.stderr!s}"
            raise JourneyError(
                f"gatecast {' '.join(args)} did not end in {timeout} s:\n{out}"
            ) from None
        result = Result(tuple(args), done.returncode, done.stdout + done.stderr)
        if ok and done.returncode != 0:
            raise JourneyError(
                f"gatecast {' '.join(args)} exited {done.returncode}:\n{result.output}"
            )
        if "Traceback (most recent call last)" in result.output:
            raise JourneyError(f"gatecast {' '.join(args)} printed a traceback:\n{result.output}")
        return result

    def link_sender(self) -> str:
        """README step 1: ``instance create``, then ``instance qr ID`` (an auto-linking
        sandbox links it then, as a phone's scan would); returns the instance id."""
        created = self.run("instance", "create").output
        found = re.search(r"\b([0-9A-F]{10,})\b", created)
        if not found:
            raise JourneyError(f"instance create printed no instance id:\n{created}")
        self.run("instance", "qr", found.group(1))
        return found.group(1)

    def spawn(self, *args: str, **env: str) -> Process:
        """Start ``gatecast ARGS`` in the background (stopped when the journey ends)."""
        log_path = self.path / f"{args[0]}-{len(self.processes)}.log"
        proc = _spawn(args, self.env(**env), self.path, log_path)
        self.processes.append(proc)
        return proc

    def serve(self, *args: str, timeout: float = 60.0, **env: str) -> Server:
        """``gatecast serve --port 0`` until it says where it serves; an API client on it."""
        proc = self.spawn("serve", "--port", "0", *args, **env)
        deadline = time.monotonic() + timeout
        marker = "gatecast serving on "
        while time.monotonic() < deadline:
            text = proc.output()
            if marker in text:
                proc.url = text.split(marker, 1)[1].split()[0]
                return Server(proc, proc.url)
            if proc.popen.poll() is not None:
                break
            time.sleep(0.05)
        proc.kill()
        raise JourneyError(f"gatecast serve did not start:\n{proc.output()}")

    @property
    def state_folder(self) -> Path:
        """Where the workspace's receiver keeps its journal and control socket."""
        return Path(self.settings.get("GATECAST_JOURNAL_DIR", self.path))

    def receiver(self) -> ReceiverInfo | None:
        """The ``gatecast receive`` process serving this workspace, if one answers."""
        from gatecast.runtime.receiver_control import running_receiver

        return running_receiver(self.state_folder)

    def intake(self) -> IntakeInfo | None:
        """The intake serving this workspace (``serve``'s), if one answers."""
        from gatecast.intake.supervisor import running_intake

        hello = running_intake(self.state_folder)
        if hello is None:
            return None
        return IntakeInfo(int(hello["pid"]), int(hello["handler"]), str(hello["url"]))

    def close(self) -> None:
        """Stop every process this workspace started, and a receiver or intake a killed
        ``serve`` left serving (they outlive its crash by design)."""
        for proc in self.processes:
            proc.stop(timeout=15)
        left = self.receiver()
        if left is not None:
            stop_pid(left.pid)
        intake = self.intake()
        if intake is not None:
            stop_pid(intake.pid)  # the supervisor stops its handler


@dataclass(frozen=True)
class IntakeInfo:
    """A running intake: its supervisor's pid, its handler's pid, the URL it serves."""

    pid: int
    handler: int
    url: str


def pid_alive(pid: int) -> bool:
    """True while process ``pid`` exists (a zombie of ours counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def stop_pid(pid: int, timeout: float = 30.0) -> None:
    """SIGTERM process ``pid`` and wait for it to go (SIGKILL after ``timeout``)."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if pid_alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


@dataclass
class Server:
    """A running ``gatecast serve``: its process and an authenticated API client."""

    process: Process
    url: str

    def api(self, key: str | None = API_KEY) -> httpx.Client:
        """An HTTP client for ``/api/v1`` with the API key (None: anonymous)."""
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30.0)

    def stop(self) -> int:
        """SIGTERM, as a service manager stops it."""
        return self.process.stop()


#: a journey's databases: SQLite in the fast suite, PostgreSQL in the slow one
SQLITE_AND_SLOW_POSTGRES = [
    "sqlite",
    pytest.param("postgresql", marks=[pytest.mark.postgres, pytest.mark.slow]),
]


def use_database(ws: Workspace, database: str, request: pytest.FixtureRequest) -> None:
    """Point ``ws`` at the test's PostgreSQL database (upgraded) when ``database`` says
    so; SQLite is the workspace's own."""
    if database == "postgresql":
        ws.settings["GATECAST_DATABASE_URL"] = str(request.getfixturevalue("pg_url"))
        ws.run("db", "upgrade")


def import_people(ws: Workspace, people: dict[str, str], list_name: str = "customers") -> None:
    """``contacts import`` of a CSV of ``people`` (name -> phone) into ``list_name``."""
    (ws.path / "people.csv").write_text(
        "name,phone\n" + "".join(f"{n},{p}\n" for n, p in people.items()), encoding="utf-8"
    )
    ws.run("contacts", "import", "people.csv", "--list", list_name)


def link_sender_over_api(api: httpx.Client, label: str = "shop") -> str:
    """An integrator links a sender: ``POST /instances``, then ``POST /link`` (an auto-linking
    sandbox links it then); waits until it is connected and returns its instance id."""
    created = api.post("/api/v1/instances", json={"label": label})
    if created.status_code != 201:
        raise JourneyError(f"POST /instances answered {created.status_code}: {created.text}")
    iid = str(created.json()["instance_id"])
    api.post(f"/api/v1/instances/{iid}/link")
    wait_for(
        lambda: api.get(f"/api/v1/instances/{iid}").json()["state"] == "connected",
        what="the instance to be connected",
    )
    return iid


def ok(answer: httpx.Response, *codes: int) -> Any:
    """The JSON of an API answer whose status is one of ``codes`` (default 200)."""
    assert answer.status_code in (codes or (200,)), (answer.status_code, answer.text)
    return answer.json()


def import_samples(api: httpx.Client, list_name: str = "customers") -> dict[str, Any]:
    """``POST /api/v1/imports`` of samples/contacts.csv into ``list_name``: the job (202)."""
    with (SAMPLES / "contacts.csv").open("rb") as fh:
        return dict(
            ok(
                api.post(
                    "/api/v1/imports",
                    files={"file": ("contacts.csv", fh, "text/csv")},
                    data={"list_name": list_name},
                ),
                202,
            )
        )


def campaign_over_api(server: Server, campaign_id: int) -> dict[str, Any]:
    """The campaign as ``GET /campaigns/{id}`` of ``server`` shows it."""
    with server.api() as api:
        found: dict[str, Any] = ok(api.get(f"/api/v1/campaigns/{campaign_id}"))
    return found


def import_over_api(api: httpx.Client, path: Path, list_name: str) -> dict[str, Any]:
    """``POST /imports`` of the file ``path`` into ``list_name``; waits for the job to end
    and returns it."""
    with path.open("rb") as fh:
        job = ok(
            api.post(
                "/api/v1/imports", files={"file": (path.name, fh)}, data={"list_name": list_name}
            ),
            202,
        )
    done: dict[str, Any] = wait_for(
        lambda: (j := ok(api.get(f"/api/v1/imports/{job['id']}")))["status"] != "running" and j,
        what="the import",
    )
    return done


def table_value(output: str, label: str) -> str:
    """The value beside ``label`` in a table the CLI printed (``│ label │ value │``)."""
    found = re.search(rf"{re.escape(label)}\s*[│|]\s*([^│|\n]+?)\s*[│|]", output)
    if not found:
        raise JourneyError(f"no {label!r} in the output:\n{output}")
    return found.group(1)


def wait_for(
    check: Any, *, timeout: float = 60.0, every: float = 0.2, what: str = "the condition"
) -> Any:
    """Poll ``check()`` until it returns something truthy; that value is returned."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(every)
    raise JourneyError(f"timed out after {timeout} s waiting for {what} (last: {last!r})")


def assert_problem(res: httpx.Response, status: int, code: str) -> dict[str, Any]:
    """``res`` is an RFC 9457 problem with ``status`` and ``code``, and nothing leaked."""
    assert res.status_code == status, res.text
    assert res.headers["content-type"].startswith(PROBLEM_JSON), res.headers
    body = res.json()
    assert isinstance(body, dict), body
    assert body["status"] == status and body["code"] == code, body
    assert isinstance(body["type"], str) and body["type"], body
    assert isinstance(body["title"], str) and body["title"], body
    assert isinstance(body["detail"], str) and body["detail"], body
    assert_nothing_leaked(res.text)
    return body


def assert_nothing_leaked(text: str) -> None:
    """No traceback, temporary folder, server path or CLI option in a web answer."""
    assert "Traceback" not in text, text
    assert "/tmp" not in text and "gatecast-upload-" not in text, text
    assert str(Path.cwd()) not in text, text
    assert not re.search(r"(?<![\w-])--[a-z]", text), text
    assert "`gatecast " not in text, text


@contextlib.contextmanager
def workspace(path: Path, gateway_url: str = "", **settings: str) -> Iterator[Workspace]:
    """A :class:`Workspace` whose processes are stopped at the end."""
    ws = Workspace(path, gateway_url, dict(settings))
    path.mkdir(parents=True, exist_ok=True)
    try:
        yield ws
    finally:
        ws.close()
