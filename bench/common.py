"""Shared benchmark helpers: figures as JSON lines, peak RSS, timing, a results table."""

from __future__ import annotations

import json
import platform
import resource
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil


def _no_warmup() -> None:
    """Benchmarks measure gatecast's own cost on senders they just created: the sender
    warm-up (a new number's first days, docs/scheduling-and-pacing.md) would cap them at
    15 messages. Off in this process and in the ``gatecast`` commands it starts."""
    import os
    from dataclasses import replace

    from scheduler.care import DEFAULTS, configure

    os.environ["GATECAST_WARMUP_ENABLED"] = "false"
    configure(replace(DEFAULTS, warmup_enabled=False))


_no_warmup()

#: the warm-up day :func:`warmup_as_users` gives each sender: past the ramp
#: (``scheduler.care``: 7 doubling days), an established number's
ESTABLISHED_DAY = 30
#: how a figure measured with :func:`warmup_as_users` says so
WARMUP_AS_USERS = f"on (each sender on day {ESTABLISHED_DAY}: an established number)"


def warmup_as_users(engine: Any, senders: Iterable[str]) -> None:
    """Warm-up as users have it for numbers they bring: on (in this process and in the
    processes it starts from now on), each of ``senders`` set to day
    :data:`ESTABLISHED_DAY` as ``gatecast instance warmup --day`` does, so its bookkeeping
    (the allowance, the known-chat probes) runs on every claim and only the daily cap
    limits. A new number's day 1 (15 messages) would measure nothing but the cap."""
    import os

    from campaigns.instances import WarmupChange, set_warmup
    from scheduler.care import DEFAULTS, configure
    from storage.types import utcnow

    os.environ["GATECAST_WARMUP_ENABLED"] = "true"
    configure(DEFAULTS)
    for iid in senders:
        set_warmup(engine, iid, WarmupChange(day=ESTABLISHED_DAY), now=utcnow())


class BenchError(RuntimeError):
    """The benchmark could not measure what it claims (wrong counts, a dead helper)."""


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far, in MB.

    Reads ``VmHWM`` from ``/proc/self/status`` on Linux: ``ru_maxrss`` survives
    ``fork`` + ``exec``, so a child started by a big parent would report the parent's
    peak. Elsewhere falls back to ``ru_maxrss`` (KiB on Linux).
    """
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def current_rss_mb() -> float:
    """Current resident set size of this process, in MB."""
    return float(psutil.Process().memory_info().rss) / (1024 * 1024)


def machine() -> dict[str, Any]:
    """A short description of the machine, for the record."""
    return {
        "python": platform.python_version(),
        "cpus": psutil.cpu_count(),
        "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
        "platform": platform.platform(terse=True),
    }


@dataclass
class Figures:
    """Collects figures of one benchmark and prints each as a JSON line at once."""

    bench: str
    rows: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def begin(cls, bench: str) -> Figures:
        """The figures of ``bench``, after printing the machine's description on stderr."""
        print(json.dumps({"bench": bench, "machine": machine()}), file=sys.stderr)
        return cls(bench)

    def add(self, name: str, value: float, unit: str, **extra: Any) -> None:
        """Record and print one figure."""
        row = {"bench": self.bench, "figure": name, "value": round(value, 3), "unit": unit}
        row.update(extra)
        self.rows.append(row)
        print(json.dumps(row), flush=True)

    def ratio(self, name: str, numerator: float, denominator: float, goal: str) -> None:
        """Record a ratio figure with the goal it is judged against."""
        value = numerator / denominator if denominator else float("nan")
        self.add(name, value, "x", goal=goal)

    def table(self) -> None:
        """Print the figures as an aligned table on stderr (stdout stays JSON lines)."""
        width = max((len(r["figure"]) for r in self.rows), default=10)
        print(f"\n{self.bench}", file=sys.stderr)
        for r in self.rows:
            goal = f"   goal {r['goal']}" if "goal" in r else ""
            print(
                f"  {r['figure']:<{width}}  {r['value']:>14,.3f} {r['unit']}{goal}", file=sys.stderr
            )


@contextmanager
def stopwatch() -> Iterator[list[float]]:
    """``with stopwatch() as t: ...`` then ``t[0]`` is the elapsed seconds."""
    box: list[float] = [0.0]
    start = time.perf_counter()
    try:
        yield box
    finally:
        box[0] = time.perf_counter() - start


def report(figures: Figures, measure: Callable[[], None]) -> int:
    """Run ``measure`` (it adds to ``figures``), print the table; the exit status.

    1 when the run could not vouch for its figures (:class:`BenchError`, said on stderr);
    a missed goal is a figure, not a failure: 0.
    """
    try:
        measure()
    except BenchError as exc:
        print(f"{figures.bench}: ERROR: {exc}", file=sys.stderr)
        figures.table()
        return 1
    figures.table()
    return 0


def each_database(
    sizes: Iterable[int], no_pg: bool, run: Callable[[Path, int, bool], None]
) -> None:
    """``run(tmp, size, pg)`` for each size on SQLite, then (unless ``no_pg``) on
    PostgreSQL, all in one temporary directory ``tmp``."""
    with tempfile.TemporaryDirectory(prefix="gatecast-bench-") as tmpdir:
        for size in sizes:
            for pg in (False, True)[: 1 if no_pg else 2]:
                run(Path(tmpdir), size, pg)


def child_report(name: str, measure: Callable[[], Any]) -> int:
    """In a measuring child process: print ``measure()`` as one JSON line; the exit status
    (1 with the error on stderr when it raised :class:`BenchError`)."""
    try:
        print(json.dumps(measure()))
    except BenchError as exc:
        print(f"{name}: ERROR: {exc}", file=sys.stderr)
        return 1
    return 0


@contextmanager
def slow_gateway(
    tmp: Path, *, senders: int, latency_ms: int, extra: Iterable[str] = ()
) -> Iterator[str]:
    """``gatecast sandbox`` in its own process as the many-sender benchmarks run it
    (``bench.startup``, ``bench.senders``): every request answered after ``latency_ms``
    (a web-session gateway), room for ``senders`` instances and a few more, auto-linking;
    ``extra`` options after those. Yields its URL; stopped afterwards."""
    from bench.dispatch import sandbox_process  # bench.dispatch imports this module

    latency = f"{latency_ms}-{latency_ms}"
    room = str(senders + 10)
    with sandbox_process(tmp, "--latency-ms", latency, "--max-instances", room, *extra) as url:
        yield url
