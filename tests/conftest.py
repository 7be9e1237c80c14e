"""Shared fixtures: real SQLite files and a real PostgreSQL database per test session.

PostgreSQL tests skip with a visible reason when no server answers, except under
``GATECAST_REQUIRE_POSTGRES=1`` (set by ``.ci/run``), where they fail instead.
"""

from __future__ import annotations

import os
import queue
import shutil
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy import Engine

from gateway.sandbox import Sandbox, SandboxConfig, WebhookSink, run_sandbox_in_thread
from storage.engine import create_private, make_engine, sqlite_file, upgrade
from tests.browser import launched_chromium

PG_ADMIN_URL = os.environ.get(
    "GATECAST_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
)


#: the fixtures that reach the PostgreSQL server
PG_FIXTURES = ("pg_server", "pg_url", "pg_head_url", "pg_engine")


@pytest.hookimpl(tryfirst=True)  # before ``-m`` selects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark ``postgres`` every test using the PostgreSQL server through a fixture: ``make
    test-slow`` runs the slow ones apart from the rest, one after the other (the kill
    suite's restart scenario stops the server)."""
    for item in items:
        if set(PG_FIXTURES) & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.postgres)


@pytest.fixture(autouse=True, scope="session")
def _no_default_warmup() -> Iterator[None]:
    """Tests that are not about the warm-up send as before it existed: the default
    ramp is off in this process and in the ``gatecast`` commands it starts (warm-up tests
    turn it on, or give a sender its own ramp)."""
    from dataclasses import replace

    from scheduler.care import DEFAULTS, configure

    os.environ["GATECAST_WARMUP_ENABLED"] = "false"
    configure(replace(DEFAULTS, warmup_enabled=False))
    yield
    configure(DEFAULTS)


def _pg_unavailable_reason() -> str | None:
    try:
        eng = sa.create_engine(PG_ADMIN_URL, connect_args={"connect_timeout": 3})
        with eng.connect() as conn:
            conn.execute(sa.text("select 1"))
        eng.dispose()
    except Exception as exc:  # any failure to reach the server
        return f"PostgreSQL not reachable at {PG_ADMIN_URL}: {type(exc).__name__}"
    return None


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str]:
    """The admin URL of a reachable PostgreSQL server (or a skip / failure)."""
    reason = _pg_unavailable_reason()
    if reason:
        if os.environ.get("GATECAST_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"{reason} (GATECAST_REQUIRE_POSTGRES=1)")
        pytest.skip(reason)
    yield PG_ADMIN_URL


def _admin_exec(admin_url: str, sql: str) -> None:
    eng = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with eng.connect() as conn:
        conn.execute(sa.text(sql))
    eng.dispose()


class _Dropper:
    """Drops a test's PostgreSQL database on a thread of its own, so the next test does
    not wait for it (a ``DROP DATABASE`` waits on the disk); all are dropped before the
    session ends."""

    def __init__(self, admin_url: str) -> None:
        self.admin_url = admin_url
        self.names: queue.Queue[str | None] = queue.Queue()
        self.failures: list[str] = []
        self.thread = threading.Thread(target=self._run, name="pg-dropper", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while (name := self.names.get()) is not None:
            try:
                _admin_exec(self.admin_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            except Exception as exc:  # reported at the session's end
                self.failures.append(f"{name}: {type(exc).__name__}: {exc}")

    def close(self) -> None:
        self.names.put(None)
        self.thread.join()


@pytest.fixture(scope="session")
def _pg_dropper(pg_server: str) -> Iterator[_Dropper]:
    dropper = _Dropper(pg_server)
    yield dropper
    dropper.close()
    assert not dropper.failures, dropper.failures


def _pg_database(pg_server: str, dropper: _Dropper, template: str | None = None) -> Iterator[str]:
    """A new database (a copy of ``template``, else empty): its URL; dropped afterwards."""
    name = f"gatecast_t_{uuid.uuid4().hex[:12]}"
    like = f' TEMPLATE "{template}"' if template else ""
    _admin_exec(pg_server, f'CREATE DATABASE "{name}"{like}')
    yield sa.engine.make_url(pg_server).set(database=name).render_as_string(hide_password=False)
    dropper.names.put(name)


@pytest.fixture
def pg_url(pg_server: str, _pg_dropper: _Dropper) -> Iterator[str]:
    """A fresh, empty PostgreSQL database for one test; dropped afterwards."""
    yield from _pg_database(pg_server, _pg_dropper)


@pytest.fixture(scope="session")
def _pg_head(pg_server: str) -> Iterator[str]:
    """A PostgreSQL database migrated to head once per session (per xdist worker): the
    template of every test database at head (``CREATE DATABASE ... TEMPLATE``, a copy of
    its files, instead of running every migration again for each test)."""
    name = f"gatecast_head_{uuid.uuid4().hex[:12]}"
    _admin_exec(pg_server, f'CREATE DATABASE "{name}"')
    url = sa.engine.make_url(pg_server).set(database=name).render_as_string(hide_password=False)
    eng = make_engine(url)
    upgrade(eng)
    eng.dispose()  # a template must have no connection while it is copied
    yield name
    _admin_exec(pg_server, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def pg_head_url(pg_server: str, _pg_dropper: _Dropper, _pg_head: str) -> Iterator[str]:
    """A fresh PostgreSQL database with the schema at head for one test; dropped afterwards."""
    yield from _pg_database(pg_server, _pg_dropper, template=_pg_head)


@pytest.fixture(scope="session")
def _sqlite_head(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file migrated to head once per session (per xdist worker), closed (its
    write-ahead log folded in): copied for each test database at head."""
    path = tmp_path_factory.mktemp("sqlite-head") / "gatecast.db"
    eng = make_engine(f"sqlite:///{path}")
    upgrade(eng)
    eng.dispose()
    assert not path.with_name(path.name + "-wal").exists()
    return path


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """A fresh SQLite file for one test."""
    return f"sqlite:///{tmp_path / 'gatecast.db'}"


def _at_head(sqlite_url: str, head: Path) -> str:
    """``sqlite_url``'s file as a copy of ``head`` (owner-only, as a new database is)."""
    path = sqlite_file(sqlite_url)
    assert path is not None and not path.exists(), sqlite_url
    create_private(path)
    shutil.copyfile(head, path)
    return sqlite_url


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest) -> str:
    """Each test that uses it runs once on SQLite and once on PostgreSQL: an empty
    database, or with the schema at head when the test also uses ``engine``."""
    at_head = "engine" in request.fixturenames
    if request.param == "sqlite":
        url = str(request.getfixturevalue("sqlite_url"))
        return _at_head(url, request.getfixturevalue("_sqlite_head")) if at_head else url
    return str(request.getfixturevalue("pg_head_url" if at_head else "pg_url"))


@pytest.fixture
def engine(db_url: str) -> Iterator[Engine]:
    """An engine on a fresh database, schema at head (SQLite and PostgreSQL): a copy of
    one migrated once per session (``db_url``)."""
    eng = make_engine(db_url)
    yield eng
    eng.dispose()


@pytest.fixture
def sqlite_engine(sqlite_url: str, _sqlite_head: Path) -> Iterator[Engine]:
    """An engine on a fresh SQLite file only, schema at head."""
    eng = make_engine(_at_head(sqlite_url, _sqlite_head))
    yield eng
    eng.dispose()


@pytest.fixture
def pg_engine(pg_head_url: str) -> Iterator[Engine]:
    """An engine on a fresh PostgreSQL database only, schema at head."""
    eng = make_engine(pg_head_url)
    yield eng
    eng.dispose()


# --------------------------------------------------------------------------- sandbox fixtures
@pytest.fixture
def sandbox() -> Iterator[Sandbox]:
    """A spec-dialect sandbox on a free port (real uvicorn server in a thread)."""
    with run_sandbox_in_thread(SandboxConfig(status_delays=(0.01, 0.02, 0.03))) as sb:
        yield sb


@pytest.fixture
def reference_sandbox() -> Iterator[Sandbox]:
    """A reference-dialect sandbox on a free port."""
    cfg = SandboxConfig(dialect="reference", status_delays=(0.01, 0.02, 0.03))
    with run_sandbox_in_thread(cfg) as sb:
        yield sb


@pytest.fixture
def webhook_sink() -> Iterator[WebhookSink]:
    """A local webhook receiver collecting every POSTed body (``.url``, ``.bodies``)."""
    with WebhookSink() as sink:
        yield sink


@pytest.fixture(scope="session")
def chromium_browser() -> Iterator[Any]:
    """One headless Chromium for the session's browser tests (each opens its own context)."""
    yield from launched_chromium()
