"""Record what users see from corral's commands, to show a refactor changed none of it.

    python -m scripts.record_outputs DIR      # run from a checkout with `make` done
    diff -r BEFORE AFTER                       # byte-identical, or the diff says where

It records `make run`'s three parts, `gangplace simulate --json` for a few seeds and
policies (the run time, "seconds", is blanked, and so is the demo's port), and
`corral-descheduler plan --output json` on both bundled samples. The webhook's patches
on the fixtures are pinned by tests/webhook/test_admit_golden.py.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = ROOT / ".venv" / "bin"

COMMANDS: dict[str, list[str]] = {
    "run-1-gangplace-demo.txt": ["gangplace", "demo"],
    "run-2-webhook-demo.txt": ["corral-webhook", "demo"],
    "run-3-plan.txt": ["corral-descheduler", "plan"],
    "plan-trace.json": ["corral-descheduler", "plan", "--output", "json"],
    "plan-small.json": [
        "corral-descheduler",
        "plan",
        "--snapshot",
        "sample:small",
        "--output",
        "json",
    ],
}
for seed in (42, 43):
    for policy in ("corral", "fgd", "bestfit"):
        COMMANDS[f"simulate-{policy}-{seed}.json"] = [
            "gangplace",
            "simulate",
            "--json",
            "--seed",
            str(seed),
            "--policy",
            policy,
        ]


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    for name, cmd in COMMANDS.items():
        done = subprocess.run(
            [str(BIN / cmd[0]), *cmd[1:]], capture_output=True, text=True, cwd=ROOT, check=False
        )
        text = done.stdout
        if name.startswith("simulate-") and done.returncode == 0:
            data = json.loads(text)
            data["seconds"] = None
            text = json.dumps(data, indent=1, sort_keys=True) + "\n"
        text = re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:PORT", text)
        (out / name).write_text(f"exit {done.returncode}\n{text}")
        print(f"{name}: exit {done.returncode}, {len(text)} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
