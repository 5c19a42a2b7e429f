"""What the benchmarks share: flag checks, the trace folder, and runs in processes of
their own."""

from __future__ import annotations

import multiprocessing as mp
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any, NoReturn

from gangplace.thirdparty import DATA_ENV, GET_DATA_HINT, TRACE_NODE_FILE, trace_dir


def die(message: str) -> NoReturn:
    """A bad flag: say which (``SCRIPT: message``), exit 2."""
    print(f"{Path(sys.argv[0]).name}: {message}", file=sys.stderr)
    sys.exit(2)


def parse_seeds(text: str) -> list[int]:
    """``42-51`` or ``42,43`` (or both, comma-separated)."""
    out: list[int] = []
    try:
        for part in text.split(","):
            part = part.strip()
            if "-" in part[1:]:
                a, b = part.split("-", 1)
                out.extend(range(int(a), int(b) + 1))
            elif part:
                out.append(int(part))
    except ValueError:
        die(f"--seeds {text!r}: expected numbers and ranges like 42-51")
    if not out:
        die("--seeds: empty")
    return out


def trace_folder(arg: str | None, start: Path) -> Path:
    """The trace folder: ``--trace-dir``, else ``$CORRAL_DATA``'s or ``../shared``'s (see
    :mod:`gangplace.thirdparty`)."""
    found = Path(arg) if arg else trace_dir(start)
    if found is None or not (found / TRACE_NODE_FILE).is_file():
        die(
            f"--trace-dir: no {TRACE_NODE_FILE} found (give the trace folder, or set "
            f"${DATA_ENV}; {GET_DATA_HINT})"
        )
    return found


def run_all(
    fn: Callable[..., Any], jobs: Sequence[Sequence[Any]], workers: int, *, progress: bool
) -> list[Any]:
    """``fn(*job)`` for every job, over ``workers`` processes, in the order they finish;
    ``progress``: a count of the runs done on stderr."""
    out: list[Any] = []
    start = time.perf_counter()
    with ProcessPoolExecutor(max_workers=workers) as pool:
        futs = [pool.submit(fn, *job) for job in jobs]
        for i, f in enumerate(as_completed(futs), 1):
            out.append(f.result())
            if progress:
                sys.stderr.write(f"\r{i}/{len(jobs)} runs, {time.perf_counter() - start:.0f} s")
                sys.stderr.flush()
    if progress:
        sys.stderr.write("\n")
    return out


def in_process(target: Any, *args: Any) -> Any:
    """``target(conn, *args)`` in a fresh (spawned) process; what it sends on ``conn``."""
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=target, args=(child, *args))
    proc.start()
    try:
        return parent.recv()
    finally:
        proc.join()
