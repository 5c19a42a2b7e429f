"""Real node states never stop the descheduler: a node whose pods hold more than it has
(an unowned static pod, a device plugin that over-reported), pods in odd phases, pods
on nodes missing from the dump. ``plan``, ``run --once`` and ``kubectl corral`` give a
plan (or one clear line), the node is named in a warning and left out of moves, and the
plan goes on around it."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import io
import json
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from descheduler import DeschedulerConfig, plan, state_from_list
from descheduler.cli import main as descheduler_main
from descheduler.running.process import RunOptions, run_descheduler
from kubectl_corral.cli import main as plugin_main
from kubectl_corral.cli import run as plugin_run
from tests.builders import objects as b
from tests.builders.descheduler_cluster import NOW, as_list, gang, gpu_node, pod, podgroup
from tests.builders.kubeconfig import kubeconfig
from tests.kubeapi import ApiServer

STAMP = "2026-12-02T12:00:00Z"  # NOW
NS = "corral-system"
OVER = "node n1: pods hold 3 GPUs of 2 allocatable; left out of moves"


def overfilled() -> list[Any]:
    """Three 2-GPU nodes; on n1 two 1-GPU pods and an unowned Running one (a static
    pod): 3 GPUs held of 2. A gang of two 2-GPU pods waits. The exact mover, looking for
    room, modelled n1 and found one GPU held by two pods."""
    items: list[Any] = [gpu_node(f"n{i}", 2, cpu="16") for i in range(3)]
    items += [pod("p0", "n0", 1, cpu="1"), pod("p1", "n0", 1, cpu="1")]
    items += [pod("p2", "n1", 1, cpu="1"), pod("p3", "n1", 1, cpu="1")]
    items += [pod("p4", "n2", 1, cpu="1"), pod("hog", "n1", 1, cpu="1", owner_kind="")]
    items += gang("job", [], 2, pending=2, cpu="2")
    return items


def write(tmp_path: Path, items: Sequence[Any]) -> str:
    f = tmp_path / "dump.json"
    f.write_text(json.dumps(as_list(*copy.deepcopy(list(items)))))
    return str(f)


def cli(main: Callable[[list[str]], int], *argv: str) -> tuple[int, str, str]:
    """A command's ``main`` in-process: its exit code, stdout and stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def test_plan_on_an_overfilled_node_warns_and_plans(tmp_path: Path) -> None:
    f = write(tmp_path, overfilled())
    code, out, err = cli(descheduler_main, "plan", "--snapshot", f, "--now", STAMP)
    assert code == 0, err
    assert f"corral-descheduler: warning: {f}: {OVER}\n" in err
    assert "internal error" not in err
    # the pods there stay, and the plan says why
    assert (
        "default/pod:p2 (priority 0): pod default/p2 runs on node n1, left out of moves: "
        "pods hold 3 GPUs of 2 allocatable" in out
    )
    assert "Waiting gangs that cannot start after: default/job" in out


def test_kubectl_corral_frag_plan_on_an_overfilled_node(tmp_path: Path) -> None:
    f = write(tmp_path, overfilled())
    code, out, err = cli(plugin_main, "frag", "--plan", "--snapshot", f, "--now", STAMP)
    assert code == 0, err
    assert f"kubectl corral: warning: {f}: {OVER}\n" in err and "internal error" not in err
    assert "Plan: nothing to move." in out
    code, out, err = cli(plugin_main, "frag", "--snapshot", f, "--now", STAMP, "-o", "json")
    assert code == 0 and f"{f}: {OVER}" in json.loads(out)["notes"]


def beside_an_overfilled_node() -> list[Any]:
    """Four 2-GPU nodes: n0 full, n1 over-filled, one pod on each of n2 and n3; a gang
    of one 2-GPU pod waits. Moving p4 or p5 makes room; n1 is no part of it."""
    items: list[Any] = [gpu_node(f"n{i}", 2, cpu="16") for i in range(4)]
    items += [pod("p0", "n0", 1, cpu="1"), pod("p1", "n0", 1, cpu="1")]
    items += [pod("p2", "n1", 1, cpu="1"), pod("p3", "n1", 1, cpu="1")]
    items += [pod("hog", "n1", 1, cpu="1", owner_kind="")]
    items += [pod("p4", "n2", 1, cpu="1"), pod("p5", "n3", 1, cpu="1")]
    items += gang("job", [], 2, pending=1, cpu="2")
    return items


@pytest.mark.parametrize("exact", [True, False])
def test_the_plan_goes_on_around_an_overfilled_node(exact: bool) -> None:
    config = DeschedulerConfig.model_validate({"exact_moves": {"enabled": exact}})
    p = plan(state_from_list(as_list(beside_an_overfilled_node()), NOW), config)
    assert p.waiting_after == [] and p.moves
    for m in p.moves:
        for pm in m.pods:
            assert "n1" not in (pm.node, pm.target), m.to_dict()
    assert {pm.name for m in p.moves for pm in m.pods} <= {"p4", "p5"}
    kept = {n.unit: n.reason for n in p.not_moved}
    assert kept["default/pod:p2"] == (
        "pod default/p2 runs on node n1, left out of moves: pods hold 3 GPUs of 2 allocatable"
    )


async def once(
    api: ApiServer, items: Sequence[Any], *, dry_run: bool = False
) -> tuple[int, dict[str, Any]]:
    """``run --once`` in-process against ``api`` loaded with ``items``."""
    api.store.load([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}])
    api.store.load(copy.deepcopy(list(items)))
    out = io.StringIO()
    opts = RunOptions(
        once=True,
        dry_run=dry_run,
        output="json",
        lease_namespace=NS,
        backoff_initial=0.01,
        sync_timeout=10.0,
    )
    code = await run_descheduler(
        opts,
        DeschedulerConfig(),
        client=api.client("once"),
        clock=lambda: NOW,
        out=out,
        install_signals=False,
    )
    return code, json.loads(out.getvalue()) if out.getvalue() else {}


@pytest.mark.scenario
async def test_run_once_on_an_overfilled_node_logs_it_and_plans(
    api: ApiServer, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        code, report = await once(api, overfilled())
    assert code == 0
    assert OVER in [r.getMessage() for r in caplog.records]
    assert report["waiting_gangs_after"] == ["default/job"] and report["evictions"] == []


@pytest.mark.scenario
async def test_run_once_says_which_pod_it_left_out(
    api: ApiServer, caplog: pytest.LogCaptureFixture
) -> None:
    half = pod("half", "n0", 1)
    for part in ("requests", "limits"):
        half["spec"]["containers"][0]["resources"][part][b.GPU] = "0.5"
    with caplog.at_level(logging.WARNING):
        code, _ = await once(api, [*overfilled(), half])
    assert code == 0
    left = [r for r in caplog.records if r.getMessage().startswith("object left out")]
    assert [r.getMessage() for r in left] == [
        'object left out: pod default/half: spec.containers[0].resources.requests["nvidia.com/'
        'gpu"]: "0.5" is not a whole number of GPUs; allowed: a whole number, such as "1" (a '
        "share of a GPU is asked for with the alibabacloud.com/gpu-milli annotation)"
    ]


@pytest.mark.scenario
async def test_kubectl_corral_on_a_live_cluster_notes_the_overfilled_node(
    api: ApiServer, tmp_path: Path
) -> None:
    api.store.load(copy.deepcopy(overfilled()))
    config = kubeconfig(tmp_path / "kubeconfig", api.accept("me").url, "me")
    out, err = io.StringIO(), io.StringIO()
    code = await plugin_run(["frag", "--plan", "--kubeconfig", config], out, err, environ={})
    assert code == 0, err.getvalue()
    assert f"kubectl corral: warning: {OVER}\n" in err.getvalue()
    assert "runs on node n1, left out of moves" in out.getvalue()


# --- any state a cluster can show -------------------------------------------------------

# Weighted towards what clusters mostly hold (Running pods of controllers, nodes that
# work), so that crowded nodes and waiting gangs meet often.
PHASES = ["Running"] * 6 + [None, "Pending", "Succeeded", "Failed", "Unknown", "Evicted", ""]
OWNERS = ["ReplicaSet"] * 4 + ["Job", "StatefulSet", "DaemonSet", ""]


@st.composite
def clusters(draw: st.DrawFn) -> list[Any]:
    """Up to four nodes (0 to 8 GPUs, any of them cordoned, not ready, tainted, with
    nothing allocatable), gangs with PodGroups in any phase, and pods bound anywhere
    (a node of the dump, one missing from it, none) in any phase, with or without an
    owner, whole GPUs or shares (pinned to a device or not), with no regard for what
    fits: nodes over-filled as often as not."""
    names = [f"n{i}" for i in range(draw(st.integers(1, 4)))]
    items: list[Any] = []
    for name in names:
        alloc = {
            "cpu": draw(st.sampled_from(["96", "96", "16", "2", "0"])),
            "memory": draw(st.sampled_from(["1024Gi", "1024Gi", "1Gi", "0"])),
            "pods": draw(st.sampled_from(["110", "110", "2", "0"])),
        }
        gpus = draw(st.sampled_from([2, 2, 4, 8, 1, 0]))
        if gpus:
            alloc[b.GPU] = str(gpus)
        taint = {"key": "dedicated", "value": "x", "effect": "NoSchedule"}
        items.append(
            b.node(
                name,
                alloc if draw(st.integers(0, 9)) else {},
                labels={"nvidia.com/gpu.product": "A100"} if gpus else {},
                unschedulable=draw(st.integers(0, 6)) == 0,
                ready=draw(st.integers(0, 9)) > 0,
                taints=[taint] if draw(st.integers(0, 9)) == 0 else None,
            )
        )
    gangs = [f"g{i}" for i in range(draw(st.integers(0, 3)))]
    for g in gangs:
        phase = draw(st.sampled_from(["Running", "Pending", "Inqueue", "Unknown", "Odd"]))
        items.append(podgroup(g, draw(st.integers(0, 4)), phase=phase))
    for i in range(draw(st.integers(0, 14))):
        share = draw(st.integers(0, 4)) == 0
        annotations = {}
        if share and draw(st.booleans()):
            annotations["alibabacloud.com/gpu-index"] = str(draw(st.integers(0, 3)))
        items.append(
            pod(
                f"p{i}",
                draw(st.sampled_from([*names, *names, "gone", ""])),
                0 if share else draw(st.sampled_from([1, 1, 2, 4, 0, 8, 9])),
                gpu_milli=draw(st.sampled_from([250, 500, 700])) if share else None,
                annotations=annotations,
                gang=draw(st.sampled_from([None, None, *gangs])),
                owner_kind=draw(st.sampled_from(OWNERS)),
                phase=draw(st.sampled_from(PHASES)),
                cpu=draw(st.sampled_from(["1", "1", "4", "0", "32", "200"])),
                memory=draw(st.sampled_from(["16Gi", "0", "2Ti"])),
                priority=draw(st.sampled_from([None, None, 0, 1000, 2000000000])),
            )
        )
    if draw(st.booleans()):  # a gang that waits whole
        items += gang("wait", [], draw(st.sampled_from([1, 2, 4])), pending=draw(st.integers(1, 3)))
    return items


def no_internal_error(code: int, err: str) -> None:
    assert code in (0, 2) and "internal error" not in err, err


@pytest.mark.slow
@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(items=clusters())
def test_plan_and_kubectl_corral_on_any_dump(tmp_path: Path, items: list[Any]) -> None:
    f = write(tmp_path, items)
    dump = ["--snapshot", f, "--now", STAMP]
    no_internal_error(*cli(descheduler_main, "plan", *dump)[::2])
    code, out, err = cli(descheduler_main, "plan", *dump, "--output", "json")
    no_internal_error(code, err)
    if code == 0:  # no pod moved off a node left out of moves, none onto one
        snap = state_from_list(as_list(*copy.deepcopy(items)), NOW).snapshot
        left_out = {snap.node_names[i] for i in snap.problems}
        for name in left_out:
            assert f"node {name}: " in err
        touched = {
            n for m in json.loads(out)["moves"] for p in m["pods"] for n in (p["node"], p["target"])
        }
        assert not touched & left_out
    no_internal_error(*cli(plugin_main, "frag", "--plan", *dump)[::2])
    no_internal_error(*cli(plugin_main, "gangs", "-A", *dump)[::2])


async def _once_on(items: list[Any]) -> None:
    async with ApiServer(bookmark_interval=0.2) as api:
        code, _ = await once(api, items)
        assert code in (0, 2)


@pytest.mark.slow
@pytest.mark.scenario
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(items=clusters())
def test_run_once_on_any_cluster(items: list[Any]) -> None:
    asyncio.run(_once_on(items))
