"""Client generators for the generated-client journeys (decision 69 in
docs/architecture.md): openapi-python-client as uv's isolated tool, openapi-typescript
with openapi-fetch from the npm registry, each at a pinned version, each generated once
per document and session."""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

PYTHON_GENERATOR = "openapi-python-client==0.29.1"
#: the npm packages of the TypeScript journey, pinned
TS_PACKAGES = (
    "openapi-typescript@7.13.0",
    "openapi-fetch@0.17.0",
    "typescript@5.9.3",
    "@types/node@20.19.43",
)
UV = Path(sys.executable).with_name("uv")
#: npm's download cache, kept between sessions (never in the repository)
NPM_CACHE = Path(os.environ.get("GATECAST_NPM_CACHE", "/tmp/gatecast-npm-cache"))

#: a campaign file a journey uploads (``name`` and ``list`` filled in): sent at once
CAMPAIGN_TOML = """\
name = "{name}"
list = "{list}"

[message]
type = "text"
text = "Hi {{{{ name }}}}, our offer is live. Reply STOP to opt out."

[pace]
per_minute = 0
delay_seconds = [0, 0]
"""


def _keyed(document: dict[str, Any], where: Path) -> tuple[Path, Path]:
    """The folder of ``document``'s client under ``where`` and the document written there."""
    text = json.dumps(document)  # keys in order: a media type list is ordered
    folder = where / hashlib.sha256(text.encode()).hexdigest()[:16]
    folder.mkdir(parents=True, exist_ok=True)
    spec = folder / "openapi.json"
    spec.write_text(text)
    return folder, spec


def _run(args: list[str], cwd: Path | None = None, timeout: float = 300) -> str:
    done = subprocess.run(
        args, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, f"{' '.join(args)}:\n{done.stdout}{done.stderr}"
    return done.stdout + done.stderr


def generate_python_client(document: dict[str, Any], where: Path) -> Any:
    """The ``gatecast_client`` package generated from ``document``, imported."""
    folder, spec = _keyed(document, where)
    package = folder / "gatecast_client"
    if not package.exists():
        out = _run(
            [
                *(str(UV), "tool", "run", "--from", PYTHON_GENERATOR),
                *("openapi-python-client", "generate", "--path", str(spec)),
                *("--output-path", str(package), "--meta", "none"),
            ]
        )
        assert "Warning" not in out, out  # every schema understood
    sys.path.insert(0, str(folder))
    try:
        return importlib.import_module("gatecast_client")
    finally:
        sys.path.remove(str(folder))


def node_tools() -> tuple[str, str]:
    """``node`` and ``npm``; skipped when either is missing, unless CI is set (then the
    journey fails, as the PostgreSQL tests do)."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node and npm:
        return node, npm
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail("node and npm are needed for the TypeScript client journey (CI is set)")
    pytest.skip("node or npm is not installed: the TypeScript client journey needs them")


def install_ts_tools(where: Path) -> Path:
    """The pinned npm packages installed under ``where/node`` (once per session; npm's
    download cache is :data:`NPM_CACHE`); returns that folder."""
    _, npm = node_tools()
    tools = where / "node"
    if not (tools / "node_modules").exists():
        tools.mkdir(parents=True, exist_ok=True)
        (tools / "package.json").write_text('{"private": true, "type": "module"}')
        _run(
            [npm, "install", "--no-audit", "--no-fund", "--cache", str(NPM_CACHE), *TS_PACKAGES],
            cwd=tools,
        )
    return tools


def generate_ts_client(document: dict[str, Any], where: Path, script: Path) -> Path:
    """A folder with ``schema.d.ts`` generated from ``document`` by openapi-typescript and
    ``script`` compiled by tsc (type-checked against it) to ``journey.js``."""
    tools = install_ts_tools(where)
    folder, spec = _keyed(document, where)
    link = folder / "node_modules"
    if not link.exists():
        link.symlink_to(tools / "node_modules")
    (folder / "package.json").write_text('{"private": true, "type": "module"}')
    bin_dir = tools / "node_modules" / ".bin"
    # a field with a default is optional in a body we send (openapi-typescript 7 makes it
    # required unless told: its default reads documents for answers only)
    _run(
        [
            *(str(bin_dir / "openapi-typescript"), str(spec), "-o", "schema.d.ts"),
            *("--default-non-nullable", "false"),
        ],
        cwd=folder,
    )
    shutil.copy(script, folder / "journey.ts")
    _run(
        [
            str(bin_dir / "tsc"),
            *("--strict", "--target", "es2022", "--module", "nodenext"),
            *("--moduleResolution", "nodenext", "--skipLibCheck", "--types", "node"),
            "journey.ts",
        ],
        cwd=folder,
    )
    return folder


class _Hook(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        return None


@contextlib.contextmanager
def hook_receiver() -> Iterator[str]:
    """A local endpoint that answers every webhook POST 204; yields its URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hook)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook"
    finally:
        server.shutdown()
