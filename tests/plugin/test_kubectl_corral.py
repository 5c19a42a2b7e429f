"""kubectl corral against the in-memory API server over HTTP, through a kubeconfig that
points at it, as an admin runs it: in process, as the console script, and as a kubectl
plugin."""

from __future__ import annotations

import asyncio
import io
import json
import os
import shutil
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from gangplace.engine import EngineConfig, Snapshot
from gangplace.engine.report import render_report
from gangplace.kube import rbac

from descheduler.planning.planner import plan
from descheduler.planning.state import state_from_objects
from kubectl_corral.cli import run
from kubectl_corral.namespace import context_namespace
from tests.builders import objects as b
from tests.kubeapi import ApiServer, Faults
from tests.kubeapi import objects as o

VOLCANO = "scheduling.k8s.io/group-name"
BIN = Path(sys.executable).parent


def _pg(name: str, ns: str, min_member: int, phase: str) -> dict[str, Any]:
    pg = o.volcano_podgroup(name, ns, min_member=min_member)
    pg["status"] = {"phase": phase}
    return pg


def _gang_pod(name: str, gang: str, *, node: str | None = None, gpus: int = 0, **kw: Any) -> Any:
    p = o.pod(
        name, "ml", node=node, gpus=gpus, annotations={VOLCANO: gang}, scheduler="volcano", **kw
    )
    return p


def cluster_objects() -> list[dict[str, Any]]:
    pinned = _gang_pod("train-0", "train", node="gpu-a", gpus=4)
    pinned["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["gpu"]}]}
                ]
            }
        }
    }
    cos = o.pod("cos-0", "ml", labels={"scheduling.x-k8s.io/pod-group": "cos"}, cpu="2")
    skipped = o.pod("skipme", "ml", annotations={"corral.dev/skip": "true"}, node="cpu-1")
    return [
        o.namespace("ml", {"corral.dev/gang-scheduling": "enabled"}),
        o.namespace("other"),
        o.node("gpu-a", gpus=8, gpu_model="A100", cpu="64", memory="512Gi"),
        o.node("gpu-b", gpus=8, gpu_model="A100", cpu="64", memory="512Gi"),
        o.node("cpu-1", cpu="16", memory="64Gi"),
        _pg("train", "ml", 2, "Running"),
        pinned,
        _gang_pod("train-1", "train", node="gpu-a", gpus=4),
        _pg("big", "ml", 3, "Pending"),
        *(_gang_pod(f"big-{i}", "big", gpus=8) for i in range(3)),
        _pg("small", "ml", 1, "Inqueue"),
        _gang_pod("small-0", "small", gpus=1),
        o.pod("filler", "other", node="gpu-b", gpus=6),
        o.cosched_podgroup("cos", "ml", min_member=1),
        cos,
        skipped,
        o.pod("loner", "other", node="cpu-1"),
    ]


@pytest.fixture
async def cluster(api: ApiServer, tmp_path: Path) -> tuple[ApiServer, Path]:
    api.store.load(cluster_objects())
    api.accept("t0ken")
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "test", "cluster": {"server": api.url}}],
                "users": [{"name": "admin", "user": {"token": "t0ken"}}],
                "contexts": [
                    {
                        "name": "ml",
                        "context": {"cluster": "test", "user": "admin", "namespace": "ml"},
                    },
                    {"name": "nowhere", "context": {"cluster": "test", "user": "admin"}},
                ],
                "current-context": "ml",
            }
        )
    )
    return api, kubeconfig


async def corral(kubeconfig: Path, *argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = await run([*argv, "--kubeconfig", str(kubeconfig)], out, err, environ={})
    return code, out.getvalue(), err.getvalue()


# --- gangs ------------------------------------------------------------------------------


async def test_gangs_in_the_contexts_namespace(cluster: tuple[ApiServer, Path]) -> None:
    _, kc = cluster
    code, out, err = await corral(kc, "gangs")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split() == ["GANG", "KEYS", "QUEUE", "PLACED/MIN", "WAITING", "PHASE", "STATUS"]
    rows = {line.split()[0]: line.split() for line in lines[1:5]}
    assert rows["train"][1:] == ["volcano", "default", "2/2", "0", "Running", "running"]
    assert rows["big"][3:] == ["0/3", "3", "Pending", "blocked"]
    assert rows["small"][3:] == ["0/1", "1", "Inqueue", "can-start"]
    assert rows["cos"][1:4] == ["coscheduling", "default", "0/1"]
    why = out.split("Why they have not started:\n")[1]
    # the engine's words: gpu-a is full, gpu-b holds 6 of 8 GPUs, cpu-1 has none
    assert (
        "ml/big: 0/3 required members fit; 0/3 nodes can host pod big-0: "
        "2 insufficient nvidia.com/gpu, 1 no nvidia.com/gpu\n"
    ) in why
    assert "ml/small: the 1 member(s) it needs fit now, on gpu-b" in why
    assert "skipme" not in out and "loner" not in out


async def test_gangs_everywhere_as_json(cluster: tuple[ApiServer, Path]) -> None:
    _, kc = cluster
    code, out, _ = await corral(kc, "gangs", "-A", "-o", "json")
    assert code == 0
    doc = json.loads(out)
    assert doc["namespace"] is None and doc["notes"] == []
    by = {(g["namespace"], g["name"]): g for g in doc["gangs"]}
    assert set(by) == {("ml", "train"), ("ml", "big"), ("ml", "small"), ("ml", "cos")}
    big = by[("ml", "big")]
    assert (big["placed"], big["min_available"], big["waiting"], big["status"]) == (
        0,
        3,
        3,
        "blocked",
    )
    assert big["reason"].startswith("0/3 required members fit")


async def test_namespace_flag_and_context(cluster: tuple[ApiServer, Path]) -> None:
    _, kc = cluster
    code, out, _ = await corral(kc, "gangs", "-n", "other")
    assert (code, out) == (0, "No gangs found in namespace other.\n")
    # a context without a namespace means "default", as with kubectl
    code, out, _ = await corral(kc, "gangs", "--context", "nowhere")
    assert (code, out) == (0, "No gangs found in namespace default.\n")


# --- frag -------------------------------------------------------------------------------


def _offline_plan() -> Any:
    objs = cluster_objects()
    nodes = [x for x in objs if x["kind"] == "Node"]
    pods = [x for x in objs if x["kind"] == "Pod"]
    snap = Snapshot.from_objects(nodes, pods, EngineConfig())
    others = [x for x in objs if x["kind"] not in ("Node", "Pod", "Namespace")]
    return plan(state_from_objects(snap, datetime.now(UTC), others))


async def test_frag_is_the_descheduler_report(cluster: tuple[ApiServer, Path]) -> None:
    api, kc = cluster
    code, out, _ = await corral(kc, "frag", "-o", "json")
    assert code == 0
    want = _offline_plan().report_before
    assert json.loads(out)["fragmentation"] == want.to_dict()
    code, out, _ = await corral(kc, "frag")
    assert out == render_report(want, f"GPU fragmentation of {api.url}") + "\n"
    assert "A100" in out and "Largest gang that fits all-or-nothing now" in out


async def test_frag_plan_shows_what_the_descheduler_would_do(
    cluster: tuple[ApiServer, Path],
) -> None:
    _, kc = cluster
    code, out, _ = await corral(kc, "frag", "--plan")
    assert code == 0
    assert out.startswith("corral descheduler plan ")
    assert "Waiting gangs that cannot start now:   ml/big" in out
    code, out, _ = await corral(kc, "frag", "--plan", "-o", "json")
    doc = json.loads(out)
    assert doc["plan"]["waiting_gangs_before"] == _offline_plan().to_dict()["waiting_gangs_before"]


# --- explain ----------------------------------------------------------------------------


async def test_explain_a_gang_member(cluster: tuple[ApiServer, Path]) -> None:
    _, kc = cluster
    code, out, err = await corral(kc, "explain", "train-0")
    assert code == 0, err
    assert out.splitlines()[0] == "Pod ml/train-0 (Running, on gpu-a)"
    assert "Namespace:    opted in (corral.dev/gang-scheduling=enabled)" in out
    assert "Scheduler:    volcano" in out
    assert "Gang:         train (volcano keys)" in out
    assert f"annotation  {VOLCANO}=train" in out
    assert (
        "Members:      2 placed of minAvailable 2, 0 waiting, 2 in all; PodGroup phase Running"
        in out
    )
    assert "Node pool:    pool=gpu" in out
    assert "Verdict:      gang train runs" in out


async def test_explain_a_waiting_member_as_json(cluster: tuple[ApiServer, Path]) -> None:
    _, kc = cluster
    code, out, _ = await corral(kc, "explain", "big-1", "-n", "ml", "-o", "json")
    assert code == 0
    doc = json.loads(out)
    assert (doc["gang"], doc["dialect"], doc["scheduler_name"]) == ("big", "volcano", "volcano")
    assert doc["gang_keys"] == [{"key": VOLCANO, "where": "annotation", "value": "big"}]
    assert doc["gang_state"]["status"] == "blocked"
    assert doc["verdict"].startswith("gang big has not started (blocked): 0/3 required members fit")
    assert doc["node_pool"] == [] and doc["namespace_opted_in"] is True


async def test_explain_pods_the_webhook_left_alone(cluster: tuple[ApiServer, Path]) -> None:
    _, kc = cluster
    _, out, _ = await corral(kc, "explain", "skipme")
    assert "Gang:         none" in out
    assert 'Verdict:      corral.dev/skip is "true"' in out
    _, out, _ = await corral(kc, "explain", "loner", "-n", "other")
    assert "Namespace:    not opted in" in out
    assert "namespace other is not opted in" in out


async def test_explain_says_how_the_descheduler_would_move_a_gang(
    cluster: tuple[ApiServer, Path],
) -> None:
    """A running Job's pod: its gang is moved by suspending the Job; a Job a person
    suspended is neither moved nor waiting; a pod under safe-to-evict "false" never moves."""
    api, kc = cluster
    job = b.job("etl", "ml", backoff_limit=0, uid="uid-etl")
    api.store.load([job])
    etl = b.pod(
        "etl-0",
        "ml",
        requests={"cpu": "1"},
        node="gpu-a",
        owner=b.owner_ref("Job", "etl", uid="uid-etl"),
    )
    kept = b.pod(
        "kept-0",
        "ml",
        requests={"cpu": "1"},
        node="gpu-a",
        owner=b.owner_ref("ReplicaSet", "kept", api="apps/v1", uid="uid-kept"),
        annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"},
    )
    api.store.load([etl, kept])
    _, out, err = await corral(kc, "explain", "etl-0")
    assert "Descheduler:  may be moved by suspend (suspend Job ml/etl" in out, err
    assert (
        "only for a waiting gang of higher priority, or of equal priority when the plan "
        "places it again at once"
    ) in " ".join(out.split())
    _, out, _ = await corral(kc, "explain", "kept-0")
    assert (
        "Descheduler:  not moved: pod ml/kept-0 is annotated "
        'cluster-autoscaler.kubernetes.io/safe-to-evict: "false"'
    ) in out
    api.store.replace(
        api.store.resource("jobs", "batch"),
        "ml",
        "etl",
        {**job, "spec": {**job["spec"], "suspend": True}},
    )
    _, out, _ = await corral(kc, "explain", "etl-0")
    assert (
        "Descheduler:  not moved: Job ml/etl is suspended (not by corral): it is not waiting" in out
    )


async def test_explain_a_missing_pod(cluster: tuple[ApiServer, Path]) -> None:
    _, kc = cluster
    code, out, err = await corral(kc, "explain", "ghost")
    assert (code, out) == (1, "")
    assert err == 'kubectl corral: pod "ghost" not found in namespace ml\n'


# --- read-only, errors ------------------------------------------------------------------


async def test_only_lists_attributed_to_the_plugin(cluster: tuple[ApiServer, Path]) -> None:
    api, kc = cluster
    for argv in (("gangs", "-A"), ("frag", "--plan"), ("explain", "train-0")):
        assert (await corral(kc, *argv))[0] == 0
    viewer = [rbac.viewer_role()]
    seen = set()
    for r in api.log:
        assert r.method == "GET" and not r.watch, r
        call, ns, name = rbac.request_target(r.method, r.path, r.query)
        assert rbac.permits(viewer, call, ns, name), call
        seen.add(call)
    assert {c[0] for c in seen} == {"list"}
    assert ("list", "", "pods", "") in seen and ("list", "", "namespaces", "") in seen
    # Bearer token from the kubeconfig on every request
    assert {r.authorization for r in api.log} == {"Bearer t0ken"}


async def test_forbidden_says_what_to_grant(tmp_path: Path) -> None:
    faults = Faults()
    faults.fail(status=403, path=r"/api/v1/nodes", message='nodes is forbidden: User "bob"')
    async with ApiServer(faults=faults) as api:
        api.store.load(cluster_objects())
        api.accept("x")
        kc = tmp_path / "kc"
        kc.write_text(
            yaml.safe_dump(
                {
                    "clusters": [{"name": "c", "cluster": {"server": api.url}}],
                    "users": [{"name": "u", "user": {"token": "x"}}],
                    "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                    "current-context": "c",
                }
            )
        )
        code, out, err = await corral(kc, "gangs")
    assert (code, out) == (1, "")
    assert "cannot list nodes (all namespaces): 403" in err
    assert "docs/kubectl-corral.md" in err


async def test_missing_crds_are_a_note_not_an_error(cluster: tuple[ApiServer, Path]) -> None:
    api, kc = cluster
    del api.store.types[("scheduling.x-k8s.io", "v1alpha1", "podgroups")]
    code, out, err = await corral(kc, "gangs")
    assert code == 0
    assert err == (
        "kubectl corral: warning: scheduling.x-k8s.io/v1alpha1 PodGroups: not served by this "
        "cluster\n"
    )
    assert "cos" in out  # its pods still carry the keys


async def test_no_cluster_configured(tmp_path: Path) -> None:
    out, err = io.StringIO(), io.StringIO()
    code = await run(["gangs", "--kubeconfig", str(tmp_path / "none")], out, err, environ={})
    assert code == 1 and "--kubeconfig" in err.getvalue() and "no such file" in err.getvalue()
    assert await run(["gangs", "-n", "x", "-A"], out, err, environ={}) == 2


# --- as installed -----------------------------------------------------------------------


async def _exec(*argv: str, env: dict[str, str]) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        *argv, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    return proc.returncode or 0, out.decode(), err.decode()


@pytest.mark.slow
async def test_kubectl_finds_the_plugin_on_the_path(cluster: tuple[ApiServer, Path]) -> None:
    _, kc = cluster
    kubectl = shutil.which("kubectl")
    assert kubectl, "kubectl is needed to run the plugin as kubectl does"
    # kubectl finds the installed console script on the PATH; the script finds the
    # cluster through $KUBECONFIG, as kubectl would
    env = {
        "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
        "HOME": str(kc.parent),
        "KUBECONFIG": str(kc),
    }
    code, out, err = await _exec(kubectl, "corral", "explain", "small-0", env=env)
    assert code == 0, err
    assert "Gang:         small (volcano keys)" in out
    assert (BIN / "kubectl-corral").is_file()


# --- the namespace kubectl would use ----------------------------------------------------


def test_context_namespace_merges_kubeconfigs_as_kubectl(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_text(yaml.safe_dump({"contexts": [{"name": "x", "context": {"namespace": "from-a"}}]}))
    b.write_text(
        yaml.safe_dump(
            {
                "current-context": "x",
                "contexts": [
                    {"name": "x", "context": {"namespace": "from-b"}},
                    {"name": "y", "context": {"namespace": "why"}},
                ],
            }
        )
    )
    env = {"KUBECONFIG": f"{a}{os.pathsep}{b}"}
    assert context_namespace(None, None, env) == "from-a"  # first definition wins
    assert context_namespace(None, "y", env) == "why"
    assert context_namespace(str(b), None, env) == "from-b"  # --kubeconfig beats $KUBECONFIG
    assert context_namespace(None, "unknown", env) == "default"
    sa = tmp_path / "sa"
    sa.mkdir()
    (sa / "namespace").write_text("corral-system\n")
    assert (
        context_namespace(None, None, {}, home=tmp_path, service_account_dir=sa) == "corral-system"
    )
    assert (
        context_namespace(None, None, {}, home=tmp_path, service_account_dir=tmp_path) == "default"
    )
