"""The jobs of the gang study and the cluster they run on: a mix of job shapes with
their frequencies, read from a file or a bundled preset, and nodes shaped like the
trace's node list.

A mix file is JSON: ``{"name": ..., "source": ..., "jobs": [{"workers": 2, "gpus": 8,
"cpu": "64200m", "memory": "257Gi", "weight": 0.04}, ...]}`` -- ``workers`` pods of
``gpus`` GPUs, ``cpu`` and ``memory`` each, all of which must run for the job to start;
``weight`` is how often such a job comes, relative to the others (by count). The presets
(:data:`PRESETS`) are bundled as ``gangplace/data/study-mix-NAME.json`` with the source
they are derived from (``scripts/make_study_mixes.py`` writes them from the trace).

Before a run, the jobs that fit no node of the cluster are set apart (:func:`fitting`)
and gangs larger than a share of the cluster are cut to that size (:func:`cap_gangs`);
the load is offered against the GPUs the remaining mix can use (:func:`usable_gpus`).
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Any

from gangplace.engine.gang import Gang, GangOptions, place_gang
from gangplace.engine.model import PodShape
from gangplace.engine.node_pod_records import NodeRecord
from gangplace.engine.quantity import QuantityError, to_int, to_milli
from gangplace.engine.snapshot import Snapshot
from gangplace.sim.gang_study import JobTemplate

__all__ = [
    "PRESETS",
    "JobMix",
    "MixError",
    "MixJob",
    "cap_gangs",
    "fill_ceiling",
    "fitting",
    "load_mix",
    "trace_nodes",
    "usable_gpus",
]

PRESETS = ("trace", "gang-tail", "squared")
_NODES = "study-nodes-trace.json"
_JOB_KEYS = ("workers", "gpus", "cpu", "memory", "weight")


class MixError(ValueError):
    """A mix file or preset that cannot be used; the message names the key and value."""


@dataclass(frozen=True, slots=True)
class MixJob:
    """One job shape of a mix and how often it comes (relative, by count)."""

    template: JobTemplate
    weight: float

    @property
    def is_gang(self) -> bool:
        return self.template.size > 1

    def describe(self) -> str:
        t = self.template
        return f"{t.size} x ({t.shape.describe()})"


@dataclass(frozen=True, slots=True)
class JobMix:
    name: str
    source: str
    jobs: tuple[MixJob, ...]

    @property
    def templates(self) -> list[JobTemplate]:
        return [j.template for j in self.jobs]

    @property
    def weights(self) -> list[float]:
        return [j.weight for j in self.jobs]

    def mean_gpus(self) -> float:
        """GPUs a job asks for, on average over the mix."""
        total = sum(self.weights)
        return sum(j.weight * j.template.gpu_milli for j in self.jobs) / total / 1000

    def gang_share(self) -> tuple[float, float]:
        """The share of multi-pod jobs by count, and of the GPU demand."""
        n = sum(self.weights)
        g = sum(j.weight * j.template.gpu_milli for j in self.jobs)
        gang = [j for j in self.jobs if j.is_gang]
        return (
            sum(j.weight for j in gang) / n if n else 0.0,
            sum(j.weight * j.template.gpu_milli for j in gang) / g if g else 0.0,
        )


def _job(i: int, raw: Any, where: str) -> MixJob:
    what = f"{where}: jobs[{i}]"
    if not isinstance(raw, dict):
        raise MixError(f"{what}: expected an object with {', '.join(_JOB_KEYS)}")
    unknown = sorted(set(raw) - set(_JOB_KEYS))
    if unknown:
        raise MixError(f"{what}: unknown key {unknown[0]!r}; allowed: {', '.join(_JOB_KEYS)}")
    for key in ("workers", "gpus"):
        v = raw.get(key)
        if not isinstance(v, int) or isinstance(v, bool) or v < 1 or v > 10_000:
            raise MixError(f"{what}.{key}: {v!r}: expected a whole number from 1 to 10000")
    weight = raw.get("weight")
    if (
        not isinstance(weight, int | float)
        or isinstance(weight, bool)
        or not math.isfinite(weight)
        or weight <= 0
    ):
        raise MixError(f"{what}.weight: {weight!r}: expected a number above 0")
    req: dict[str, int] = {}
    for key, parse in (("cpu", to_milli), ("memory", to_int)):
        v = raw.get(key)
        if not isinstance(v, str | int) or isinstance(v, bool):
            raise MixError(f"{what}.{key}: {v!r}: expected a quantity such as '8' or '32Gi'")
        try:
            req[key] = parse(str(v))
        except QuantityError as e:
            raise MixError(f"{what}.{key}: {v!r}: {e}") from None
        if req[key] < 0:
            raise MixError(f"{what}.{key}: {v!r}: must not be negative")
    shape = PodShape.of(req, gpus=raw["gpus"])
    return MixJob(JobTemplate(shape, raw["workers"]), float(weight))


def parse_mix(data: Any, where: str) -> JobMix:
    """A mix from the JSON of a mix file (``where`` names it in errors)."""
    if not isinstance(data, dict):
        raise MixError(f"{where}: expected an object with name, source and jobs")
    jobs = data.get("jobs")
    if not isinstance(jobs, list) or not jobs:
        raise MixError(f"{where}: jobs: expected a non-empty list of job shapes")
    for key in ("name", "source"):
        if not isinstance(data.get(key, ""), str):
            raise MixError(f"{where}: {key}: {data[key]!r}: expected a string")
    return JobMix(
        str(data.get("name") or Path(where).stem),
        str(data.get("source", "")),
        tuple(_job(i, j, where) for i, j in enumerate(jobs)),
    )


def load_mix(name_or_path: str) -> JobMix:
    """A preset by name, else a mix file by path."""
    if name_or_path in PRESETS:
        text = (
            resources.files("gangplace.data").joinpath(f"study-mix-{name_or_path}.json").read_text()
        )
        return parse_mix(json.loads(text), name_or_path)
    path = Path(name_or_path)
    try:
        text = path.read_text()
    except OSError as e:
        raise MixError(
            f"--mix {name_or_path}: {e.strerror or e} (a file, or a preset: {', '.join(PRESETS)})"
        ) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise MixError(f"{path}: not JSON: {e}") from None
    return parse_mix(data, str(path))


def trace_nodes(count: int) -> list[NodeRecord]:
    """``count`` nodes with the trace's node classes in its proportions (largest
    remainder; every class keeps at least none), named by class."""
    if count < 1:
        raise MixError(f"nodes: {count}: expected at least 1")
    data = json.loads(resources.files("gangplace.data").joinpath(_NODES).read_text())
    classes = data["classes"]
    total = sum(c["count"] for c in classes)
    exact = [count * c["count"] / total for c in classes]
    picked = [math.floor(x) for x in exact]
    order = sorted(range(len(classes)), key=lambda i: (-(exact[i] - picked[i]), i))
    for i in order[: count - sum(picked)]:
        picked[i] += 1
    out: list[NodeRecord] = []
    for c, n in zip(classes, picked, strict=True):
        tag = f"{c['model'].lower()}-{c['gpus']}gpu-{to_milli(c['cpu']) // 1000}c"
        for k in range(n):
            out.append(
                NodeRecord(
                    name=f"{tag}-{k:03d}",
                    allocatable={
                        "cpu": to_milli(c["cpu"]),
                        "memory": to_int(c["memory"]),
                        "pods": 110,
                    },
                    labels={"corral.dev/gpu-model": c["model"]},
                    gpu_resource="nvidia.com/gpu",
                    gpu_count=c["gpus"],
                    gpu_model=c["model"],
                )
            )
    return out


def _fits(nodes: Sequence[NodeRecord], t: JobTemplate) -> bool:
    snap = Snapshot(list(nodes))
    res = place_gang(
        snap,
        Gang.uniform("probe", t.shape, t.size),
        options=GangOptions(best_effort=False, dry_run=True, explain=False),
    )
    return res.ok


def fitting(mix: JobMix, nodes: Sequence[NodeRecord]) -> tuple[JobMix, list[MixJob]]:
    """The mix without the jobs that fit no empty cluster of ``nodes``, and those jobs."""
    keep: list[MixJob] = []
    left: list[MixJob] = []
    for j in mix.jobs:
        (keep if _fits(nodes, j.template) else left).append(j)
    return replace(mix, jobs=tuple(keep)), left


def cap_gangs(mix: JobMix, max_gpus: int) -> tuple[JobMix, list[tuple[MixJob, int]]]:
    """Gangs asking more than ``max_gpus`` cut to the most workers within it (at least
    one); the cut ones with their new worker count."""
    out: list[MixJob] = []
    cut: list[tuple[MixJob, int]] = []
    for j in mix.jobs:
        t = j.template
        per = t.shape.gpu_demand_milli / 1000
        if t.size > 1 and per > 0 and t.size * per > max_gpus:
            size = max(1, int(max_gpus // per))
            cut.append((j, size))
            out.append(MixJob(JobTemplate(t.shape, size), j.weight))
        else:
            out.append(j)
    return replace(mix, jobs=tuple(out)), cut


def usable_gpus(mix: JobMix, nodes: Sequence[NodeRecord]) -> int:
    """GPUs on the nodes that can hold a worker of at least one job of the mix."""
    total = 0
    seen: dict[tuple[object, ...], bool] = {}  # by what a node offers
    for n in nodes:
        if not n.gpu_count:
            continue
        key = (tuple(sorted(n.allocatable.items())), n.gpu_count, n.gpu_model, n.taints)
        if key not in seen:
            seen[key] = any(_fits([n], JobTemplate(j.template.shape, 1)) for j in mix.jobs)
        total += n.gpu_count if seen[key] else 0
    return total


def fill_ceiling(
    mix: JobMix, nodes: Sequence[NodeRecord], seeds: Sequence[int] = range(1, 6)
) -> float:
    """The mix's ceiling: the share (%) of the GPUs that jobs drawn from it in their
    proportions keep busy -- an empty cluster filled by jobs drawn from the mix, each
    placed whole, until the first that fits nowhere (median over ``seeds``). A
    scheduler that starts other jobs past that one serves the mix's small jobs ahead of
    its share, and its large ones wait for ever."""
    total = sum(n.gpu_count for n in nodes)
    if not mix.jobs or total == 0:
        return 0.0
    shares: list[float] = []
    for seed in seeds:
        rnd = random.Random(seed)
        snap = Snapshot(list(nodes))
        used = 0
        while True:
            t = rnd.choices(mix.templates, mix.weights)[0]
            res = place_gang(
                snap,
                Gang.uniform("fill", t.shape, t.size),
                options=GangOptions(best_effort=False, explain=False),
            )
            if not res.ok:
                break
            used += t.gpu_milli
        shares.append(100.0 * used / 1000 / total)
    return sorted(shares)[len(shares) // 2]
