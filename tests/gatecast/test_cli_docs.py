"""docs/cli.md is generated from the CLI and must match it (`make docs` regenerates it)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_cli_reference_is_current(tmp_path: Path) -> None:
    out = tmp_path / "cli.md"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "typer",
            "gatecast.cli",
            "utils",
            "docs",
            "--name",
            "gatecast",
            "--title",
            "gatecast command-line reference",
            "--output",
            str(out),
        ],
        check=True,
        cwd=ROOT,
        capture_output=True,
    )
    committed = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    assert out.read_text(encoding="utf-8") == committed, (
        "docs/cli.md is out of date with the CLI: run `make docs` and commit it"
    )
