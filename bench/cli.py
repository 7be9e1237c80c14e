"""``python -m bench.cli [--full] [--runs N] [--bin DIR ...]``: the CPU a CLI command costs.

What an operator pays for each ``gatecast`` command they type: the CPU time (user + system)
of the whole child process, read from ``getrusage(RUSAGE_CHILDREN)`` before and after each
run, the median of N runs. Commands run against a real SQLite database that the benchmark
fills the way a user does (``contacts import`` of ``samples/contacts.csv``, ``campaign
create``), so ``campaign show`` reads a real campaign.

The reference, measured in the same run by the same interpreter: ``python -c "import
sqlalchemy"``, the least a command that reads the database imports. Each figure is also
given as a ratio to it (load changes the ratio less than the seconds). The runs go round
robin (each command once, then again), so a burst of load falls on all of them alike.

Bytecode as users have it: one unmeasured run of each command first compiles every module
into ``PYTHONPYCACHEPREFIX`` (a folder of the run), so no source tree is written and an
interpreter started with ``PYTHONDONTWRITEBYTECODE`` does not recompile on every run.

``--bin DIR`` (repeatable) measures the ``gatecast`` and ``python`` of another install, e.g.
``--bin /work/main/.venv/bin --bin .venv/bin`` for before and after in one run (they share
the database: its schema must be the same). Goals (issue 30): ``gatecast --version`` <= 0.3 s
and ``gatecast campaign show N`` <= 0.6 s of CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from bench.common import BenchError, Figures, report

ROOT = Path(__file__).resolve().parents[1]
CONTACTS = ROOT / "samples" / "contacts.csv"
CAMPAIGN = (
    'name = "CLI bench"\nlist = "customers"\n[message]\ntype = "text"\n'
    'text = "Hi {{ name }}"\n[schedule]\nstart = "tomorrow 10:00"\n'
)
#: (label, arguments after ``gatecast``, a text its output must hold); ``{id}``: the campaign
COMMANDS = (
    ("gatecast --version", ["--version"], "database schema"),
    ("gatecast --help", ["--help"], "campaign"),
    ("gatecast campaign show", ["campaign", "show", "{id}"], "CLI bench"),
    ("gatecast campaign list", ["campaign", "list"], "CLI bench"),
    ("gatecast contacts lists", ["contacts", "lists"], "customers"),
)
REFERENCE = 'python -c "import sqlalchemy"'
GOALS = {"gatecast --version": 0.3, "gatecast campaign show": 0.6}


@dataclass
class Install:
    """One install's ``bin`` folder and the CPU seconds of each of its commands."""

    bin: Path
    label: str
    seconds: dict[str, list[float]] = field(default_factory=dict)

    def argv(self, args: list[str]) -> list[str]:
        return [str(self.bin / "gatecast"), *args]


def _env(folder: Path) -> dict[str, str]:
    """The user's environment without gatecast settings, on the run's database."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GATECAST_")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(folder / "pycache")
    env["COLUMNS"] = "160"  # tables as wide as a terminal's, no cell cut
    env["GATECAST_DATABASE_URL"] = f"sqlite:///{folder / 'gatecast.db'}"
    return env


def _run(argv: list[str], env: dict[str, str], cwd: Path, expect: str) -> float:
    """CPU seconds (user + system) of one child running ``argv``; its output must hold
    ``expect``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0 or expect not in done.stdout:
        raise BenchError(f"{' '.join(argv)}: exit {done.returncode}: {done.stderr or done.stdout}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _make_campaign(install: Install, env: dict[str, str], folder: Path) -> int:
    """A list of 44 contacts and a scheduled campaign to it, made with the CLI; its id."""
    imported = install.argv(["contacts", "import", str(CONTACTS), "--list", "customers"])
    _run(imported, env, folder, "imported")
    spec = folder / "campaign.toml"
    spec.write_text(CAMPAIGN, encoding="utf-8")
    out = subprocess.run(
        install.argv(["campaign", "create", str(spec), "--json"]),
        env=env,
        cwd=folder,
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise BenchError(f"campaign create: {out.stderr}")
    campaign_id: int = json.loads(out.stdout)["id"]
    return campaign_id


def measure(figures: Figures, installs: list[Install], runs: int) -> None:
    with tempfile.TemporaryDirectory(prefix="gatecast-bench-cli-") as tmp:
        folder = Path(tmp)
        env = _env(folder)
        campaign_id = _make_campaign(installs[0], env, folder)
        plan: list[tuple[Install, str, list[str], str]] = []
        for install in installs:
            python = str(install.bin / "python")
            plan.append((install, REFERENCE, [python, "-c", "import sqlalchemy"], ""))
            for label, args, expect in COMMANDS:
                argv = install.argv([a.format(id=campaign_id) for a in args])
                plan.append((install, label, argv, expect))
        for _install, _label, argv, expect in plan:  # compile into the pycache folder first
            _run(argv, env, folder, expect)
        for _ in range(runs):
            for install, label, argv, expect in plan:
                install.seconds.setdefault(label, []).append(_run(argv, env, folder, expect))
    for install in installs:
        reference = statistics.median(install.seconds[REFERENCE])
        suffix = f" [{install.label}]" if len(installs) > 1 else ""
        figures.add(f"{REFERENCE}{suffix}", reference, "s CPU", runs=runs)
        for label, _args, _expect in COMMANDS:
            seconds = statistics.median(install.seconds[label])
            goal = GOALS.get(label)
            extra = {"goal": f"<= {goal} s"} if goal is not None else {}
            figures.add(f"{label}{suffix}", seconds, "s CPU", runs=runs, **extra)
            figures.ratio(
                f"{label} / import sqlalchemy{suffix}",
                seconds,
                reference,
                goal=f"<= {goal / reference:.2f}x (the {goal} s goal)" if goal else "-",
            )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--full", action="store_true", help="more runs (15 rather than 7)")
    parser.add_argument("--runs", type=int, help="runs of each command (median)")
    parser.add_argument(
        "--bin",
        action="append",
        type=Path,
        help="an install's bin folder (repeatable); default: this interpreter's",
    )
    args = parser.parse_args()
    runs = args.runs or (15 if args.full else 7)
    folders = args.bin or [Path(sys.executable).parent]
    installs = [Install(b.absolute(), str(b)) for b in folders]
    figures = Figures.begin("cli")
    return report(figures, lambda: measure(figures, installs, runs))


if __name__ == "__main__":
    raise SystemExit(main())
