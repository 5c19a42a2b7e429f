"""Reading the Alibaba GPU cluster trace (v2023, the FGD paper's "openb") from CSV.

Node lists: ``sn, cpu_milli, memory_mib, gpu, model``. Pod lists: ``name, cpu_milli,
memory_mib, num_gpu, gpu_milli[, gpu_spec, ...]``. Units as the trace's README gives
them; memory becomes bytes. Pods are read as the paper's converter reads them: a pod
with ``num_gpu`` 0 is CPU-only, ``gpu_milli`` is clamped to 0..1000, ``gpu_spec`` lists
allowed models joined by ``|``. Errors name the file and line.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterator
from pathlib import Path

from gangplace.engine import NodeRecord, PodShape
from gangplace.engine.node_pod_records import MAX_GPUS_PER_NODE
from gangplace.engine.requests import MAX_QUANTITY
from gangplace.sim.arrivals import TracePod
from gangplace.thirdparty import GET_DATA_HINT, TRACE, TRACE_NODE_FILE, trace_dir

__all__ = [
    "DEFAULT_TRACE_DIR",
    "GPU_NODE_FILE",
    "TraceError",
    "find_trace_dir",
    "load_nodes",
    "load_pods",
    "pod_list_path",
    "trace_names",
]

GPU_NODE_FILE = TRACE_NODE_FILE
POD_PREFIX = "openb_pod_list_"
MIB = 1 << 20
PODS_PER_NODE = 1001  # the paper's node limit; it never binds
DEFAULT_TRACE_DIR = Path("shared") / TRACE


class TraceError(ValueError):
    """A trace file that cannot be read; the message names the file (and line)."""


def find_trace_dir(start: Path | None = None) -> Path | None:
    """``$CORRAL_TRACE_DIR``, else ``data/alibaba-gpu-v2023`` of ``$CORRAL_DATA``, else
    ``shared/data/alibaba-gpu-v2023`` in ``start`` (default: the working directory) or any
    parent (the project's checkout sits beside ``shared/``): see :mod:`gangplace.thirdparty`."""
    return trace_dir(start)


def trace_names(trace_dir: Path) -> list[str]:
    """The pod lists in ``trace_dir`` by short name (``default``, ``cpu050``, ...)."""
    return sorted(
        p.name[len(POD_PREFIX) : -len(".csv")] for p in trace_dir.glob(f"{POD_PREFIX}*.csv")
    )


def pod_list_path(name_or_path: str, trace_dir: Path | None) -> Path:
    """A pod list given as a path, or by short name inside ``trace_dir``."""
    p = Path(name_or_path)
    if p.suffix == ".csv" or p.exists():
        return p
    if trace_dir is None:
        raise TraceError(
            f"pod list {name_or_path!r}: no trace folder to look in (use a path, or set "
            f"$CORRAL_DATA; {GET_DATA_HINT})"
        )
    return trace_dir / f"{POD_PREFIX}{name_or_path}.csv"


def _rows(path: Path, needed: tuple[str, ...]) -> Iterator[tuple[int, dict[str, str]]]:
    try:
        f = path.open(newline="")
    except OSError as e:
        raise TraceError(f"{path}: {e.strerror or e}") from None
    with f:
        try:
            reader = csv.DictReader(f)
            missing = [c for c in needed if c not in (reader.fieldnames or ())]
            if missing:
                raise TraceError(f"{path}: missing column(s) {', '.join(missing)}")
            for row in reader:
                yield reader.line_num, row
        except UnicodeDecodeError:
            raise TraceError(f"{path}: not a CSV file (not UTF-8 text)") from None
        except csv.Error as e:
            raise TraceError(f"{path}: not a CSV file ({e})") from None


# Counts beyond this are no cluster's (and beyond what the engine's int64 arrays hold).
_LARGEST = 2**53


def _bounded(path: Path, line: int, cpu: int, mem_mib: int) -> None:
    """CPU and memory the engine's int64 sums can hold."""
    if cpu > MAX_QUANTITY or mem_mib * MIB > MAX_QUANTITY:
        raise TraceError(f"{path}:{line}: cpu_milli or memory_mib too large for any node")


def _int(path: Path, line: int, row: dict[str, str], col: str) -> int:
    raw = (row.get(col) or "").strip()
    try:
        n = int(raw) if len(raw) <= 20 else _LARGEST + 1
    except ValueError:
        try:
            f = float(raw)
        except ValueError:
            raise TraceError(f"{path}:{line}: {col}={raw!r} is not a number") from None
        if not math.isfinite(f) or f != int(f):
            raise TraceError(f"{path}:{line}: {col}={raw!r} is not a whole number") from None
        n = int(f)
    if abs(n) > _LARGEST:
        raise TraceError(f"{path}:{line}: {col}={raw[:24]!r}: out of range (at most {_LARGEST})")
    return n


def load_nodes(path: str | Path) -> list[NodeRecord]:
    """Nodes of a node list; GPU nodes expose ``nvidia.com/gpu`` with their model."""
    path = Path(path)
    out: list[NodeRecord] = []
    seen: set[str] = set()
    for line, row in _rows(path, ("sn", "cpu_milli", "memory_mib", "gpu")):
        name = (row.get("sn") or "").strip()
        if not name:
            raise TraceError(f"{path}:{line}: empty node name (sn)")
        if name in seen:
            raise TraceError(f"{path}:{line}: node {name} listed twice")
        seen.add(name)
        cpu, mem, gpus = (_int(path, line, row, c) for c in ("cpu_milli", "memory_mib", "gpu"))
        if cpu < 0 or mem < 0 or gpus < 0:
            raise TraceError(f"{path}:{line}: negative capacity on node {name}")
        _bounded(path, line, cpu, mem)
        if gpus > MAX_GPUS_PER_NODE:
            raise TraceError(
                f"{path}:{line}: node {name}: gpu={gpus}: at most {MAX_GPUS_PER_NODE} per node"
            )
        model = (row.get("model") or "").strip()
        out.append(
            NodeRecord(
                name=name,
                allocatable={"cpu": cpu, "memory": mem * MIB, "pods": PODS_PER_NODE},
                labels={"corral.dev/gpu-model": model} if model else {},
                gpu_resource="nvidia.com/gpu" if gpus else None,
                gpu_count=gpus,
                gpu_model=model if gpus else "",
            )
        )
    if not out:
        raise TraceError(f"{path}: no nodes")
    return out


def load_pods(path: str | Path) -> list[TracePod]:
    """Pods of a pod list, equal shapes shared (interned)."""
    path = Path(path)
    shapes: dict[PodShape, PodShape] = {}
    out: list[TracePod] = []
    for line, row in _rows(path, ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")):
        name = (row.get("name") or "").strip()
        if not name:
            raise TraceError(f"{path}:{line}: empty pod name")
        cpu, mem, k = (_int(path, line, row, c) for c in ("cpu_milli", "memory_mib", "num_gpu"))
        if cpu < 0 or mem < 0 or k < 0:
            raise TraceError(f"{path}:{line}: negative request in pod {name}")
        _bounded(path, line, cpu, mem)
        if k > MAX_GPUS_PER_NODE:
            raise TraceError(f"{path}:{line}: pod {name}: num_gpu={k}: more than any node has")
        d = min(max(_int(path, line, row, "gpu_milli"), 0), 1000) if k else 0
        if d == 0:
            k = 0
        if k > 1 and d < 1000:
            raise TraceError(f"{path}:{line}: pod {name} shares a GPU ({d}m) but asks for {k}")
        models = tuple(m for m in (row.get("gpu_spec") or "").strip().split("|") if m) if k else ()
        shape = PodShape.of(
            {"cpu": cpu, "memory": mem * MIB}, gpus=k, gpu_milli=d or None, gpu_models=models
        )
        out.append(TracePod(name, shapes.setdefault(shape, shape)))
    if not out:
        raise TraceError(f"{path}: no pods")
    return out
