"""``python -m bench [--full] [--only NAME ...]``: run every benchmark, each in its own process.

Each benchmark runs in a fresh interpreter so its peak RSS is its own. Their JSON lines are
collected in ``bench/out/latest.jsonl``; the readable tables go to stderr.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

BENCHES = (
    "import",
    "materialise",
    "dispatch",
    "senders",
    "webhooks",
    "handover",
    "reports",
    "memory",
    "claim_cost",
    "zone_claim",
    "history",
    "segments",
    "workers",
    "outbound",
    "contact_search",
    "cli",
    "listing",
    "startup",
)
OUT = Path(__file__).parent / "out"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--full", action="store_true", help="the issue's full sizes")
    parser.add_argument("--only", nargs="*", choices=BENCHES, help="run only these")
    args = parser.parse_args()
    OUT.mkdir(exist_ok=True)
    lines: list[str] = []
    failed: list[str] = []
    for name in args.only or BENCHES:
        module = Path(__file__).parent / f"{name}.py"
        if not module.exists():
            print(f"bench: {name}: not present, skipped", file=sys.stderr)
            continue
        cmd = [sys.executable, "-m", f"bench.{name}"] + (["--full"] if args.full else [])
        print(f"bench: running {' '.join(cmd[1:])}", file=sys.stderr, flush=True)
        start = time.perf_counter()
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=False)
        sys.stdout.write(proc.stdout)
        lines += [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
        took = time.perf_counter() - start
        print(f"bench: {name} finished in {took:.1f} s (exit {proc.returncode})", file=sys.stderr)
        if proc.returncode != 0:
            failed.append(name)
    (OUT / "latest.jsonl").write_text("".join(json.dumps(json.loads(ln)) + "\n" for ln in lines))
    if failed:
        print(f"bench: failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
