"""A workload kind added in the config (a made-up ``example.com/v1`` TrainJob with a
``spec.suspend`` switch): the webhook makes gangs of it, ``make manifests`` grants the
descheduler what it grants the built-in kinds, the descheduler lists and watches it
against the in-memory API server (its CRD served there), and a planned move suspends it.
Entries that cannot be a kind are refused with one line naming the entry."""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from gangplace.config_errors import ConfigError
from gangplace.engine.kinds import KINDS
from gangplace.kube import KubeClient, rbac
from gangplace.kube.resources import (
    UndeclaredApiCall,
    added_kind_calls,
    check_call,
    declared_calls,
    workload_resource,
)

from descheduler import DeschedulerConfig, plan
from descheduler import parse_config as descheduler_config
from descheduler.cli import main as descheduler_main
from descheduler.running.cluster_view import ClusterView
from descheduler.running.kube_io import KubeIO
from descheduler.running.runner_port import MoveOutcome
from scripts import gen_manifests
from tests.builders import objects as b
from tests.builders.descheduler_cluster import NOW, as_list, gang, gpu_node, pod, podgroup
from tests.builders.reviews import annotations, checked, pod_template, review
from tests.kubeapi import ApiServer
from webhook.config import parse_config as webhook_config

NS = "corral-system"
GROUP, VERSION, KIND, PLURAL = "example.com", "v1", "TrainJob", "trainjobs"
ENTRY: dict[str, Any] = {
    "group": GROUP,
    "versions": [VERSION],
    "kind": KIND,
    "suspendPath": "spec.suspend",
}
WEBHOOK_ENTRY: dict[str, Any] = {
    **ENTRY,
    "roles": [{"at": "spec.replicatedJobs.*", "template": "template", "count": ["replicas"]}],
}


def trainjob_crd(*, switch: bool = True) -> dict[str, Any]:
    """The TrainJob's CRD: every field kept, the switch declared (or not)."""
    keep = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    spec: dict[str, Any] = {**keep, "properties": {"suspend": {"type": "boolean"}}}
    if not switch:
        spec = dict(keep)
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{PLURAL}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "names": {"kind": KIND, "plural": PLURAL, "singular": KIND.lower()},
            "scope": "Namespaced",
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {**keep, "properties": {"spec": spec, "status": keep}}
                    },
                }
            ],
        },
    }


def trainjob(name: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": KIND,
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-owner-{name}"},
        "spec": {"suspend": False},
    }


def trainjob_gang(name: str, node: str) -> list[Any]:
    """A TrainJob of one 1-GPU pod, with its PodGroup, both owned by it."""
    ref = b.owner_ref(KIND, name, api=f"{GROUP}/{VERSION}", uid=f"uid-owner-{name}")
    pg = podgroup(name, 1)
    pg["metadata"]["ownerReferences"] = [ref]
    p = pod(f"{name}-0", node, 1, gang=name, owner_kind="")
    p["metadata"]["ownerReferences"] = [ref]
    return [trainjob(name), pg, p]


def load(api: ApiServer, *, switch: bool = True) -> None:
    """The TrainJob's CRD, created as through the API (so its kind is served), then
    :func:`cluster`."""
    crds = api.store.resource("customresourcedefinitions", "apiextensions.k8s.io")
    api.store.create(crds, "", trainjob_crd(switch=switch))
    api.store.load(copy.deepcopy(cluster()))


def cluster() -> list[Any]:
    """7/6/7: the 1-GPU TrainJobs on n1 are what makes room for a waiting 4-GPU gang."""
    items: list[Any] = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}]
    items += [gpu_node(f"n{i}") for i in range(3)]
    items += [pod("big-0", "n0", 7, owner_kind=""), pod("big-2", "n2", 7, owner_kind="")]
    items += [pod("big-1", "n1", 4, owner_kind="")]
    items += [*trainjob_gang("t1", "n1"), *trainjob_gang("t2", "n1")]
    items += gang("llm", [], 4, pending=1, phase="Inqueue")
    return items


def with_trainjob(**extra: Any) -> DeschedulerConfig:
    return descheduler_config({"workloads": [ENTRY], **extra})


# --- one registry, from either config ---------------------------------------------------


def test_both_configs_make_the_same_record() -> None:
    desched = with_trainjob().kinds[(GROUP, KIND)]
    web = webhook_config({"workloads": [WEBHOOK_ENTRY]}).kinds[(GROUP, KIND)]
    assert (desched.plural, desched.version, desched.suspend_path) == (
        PLURAL,
        VERSION,
        ("spec", "suspend"),
    )
    assert desched.read and web.read and web.makes_gangs and not desched.makes_gangs
    same = ("group", "kind", "plural", "version", "suspend_path", "suspend_takes_effect")
    assert all(getattr(desched, f) == getattr(web, f) for f in same)
    assert (GROUP, KIND) not in KINDS  # the built-in registry is left as it was


@pytest.mark.parametrize(
    ("entry", "words"),
    [
        ({"group": "batch", "versions": ["v1"], "kind": "Job"}, ["workloads[0]", "built in"]),
        ({**ENTRY, "group": "Example_Com"}, ["workloads[0].group", "'Example_Com'", "DNS"]),
        ({**ENTRY, "group": "example"}, ["workloads[0].group", "with a dot"]),
        ({**ENTRY, "plural": "TrainJobs"}, ["workloads[0].plural", "'TrainJobs'", "lower-case"]),
        ({**ENTRY, "versions": ["1"]}, ["workloads[0].versions", "'1'", "v1beta1"]),
        ({**ENTRY, "suspendPath": "suspend"}, ["workloads[0].suspendPath", "under spec"]),
        ({**ENTRY, "evicted": "maybe"}, ["workloads.0.evicted", "maybe"]),
    ],
)
def test_a_bad_entry_is_refused_with_one_line(entry: dict[str, Any], words: list[str]) -> None:
    with pytest.raises(ConfigError) as e:
        descheduler_config({"workloads": [entry]})
    msg = str(e.value)
    assert "\n" not in msg and all(w in msg for w in words), msg


def test_a_kind_added_twice_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"workloads\[1\]: .* already workloads\[0\]"):
        descheduler_config({"workloads": [ENTRY, ENTRY]})
    with pytest.raises(ConfigError, match=r"workloads\[1\]: .* already workloads\[0\]"):
        webhook_config({"workloads": [WEBHOOK_ENTRY, WEBHOOK_ENTRY]})


def test_the_webhook_refuses_a_built_in_kind_again() -> None:
    job = {**WEBHOOK_ENTRY, "group": "batch", "kind": "Job"}
    built_in = r"workloads\[0\]: Job of group 'batch' is built in"
    with pytest.raises(ConfigError, match=built_in):
        webhook_config({"workloads": [job]})


# --- the webhook ------------------------------------------------------------------------


def test_the_webhook_makes_a_gang_of_the_added_kind() -> None:
    cfg = webhook_config({"workloads": [WEBHOOK_ENTRY]})
    obj = trainjob("t")
    obj["metadata"]["namespace"] = "ml"
    obj["spec"]["replicatedJobs"] = [
        {"name": "w", "replicas": 3, "template": pod_template({"nvidia.com/gpu": "1"})}
    ]
    res, patched = checked(review(obj, group=GROUP, version=VERSION), cfg)
    assert res.intents[0].body["spec"]["minMember"] == 3
    tmpl = ("spec", "replicatedJobs", 0, "template")
    assert annotations(patched, *tmpl)["scheduling.k8s.io/group-name"] == "trainjob-t"


def test_the_webhook_reads_the_added_kinds_switch() -> None:
    """Created suspended, it has no pods: no PodGroup until it is resumed."""
    cfg = webhook_config({"workloads": [WEBHOOK_ENTRY]})
    obj = trainjob("t")
    obj["metadata"]["namespace"] = "ml"
    obj["spec"] = {
        "suspend": True,
        "replicatedJobs": [{"name": "w", "replicas": 2, "template": pod_template()}],
    }
    res, _ = checked(review(obj, group=GROUP, version=VERSION), cfg)
    assert res.intents == ()
    obj["spec"]["suspend"] = False
    res, _ = checked(review(obj, group=GROUP, version=VERSION), cfg)
    assert res.intents[0].body["spec"]["minMember"] == 2


def test_the_calls_on_an_added_kind_are_declared_by_the_client_that_makes_them() -> None:
    kinds = with_trainjob().kinds
    trainjobs = workload_resource(GROUP, KIND, kinds)
    with pytest.raises(UndeclaredApiCall, match=r"patch trainjobs\.example\.com"):
        check_call("patch", trainjobs)
    declared = declared_calls(added_kind_calls(kinds))
    for verb in ("list", "watch", "patch"):
        check_call(verb, trainjobs, declared=declared)
    with pytest.raises(UndeclaredApiCall):
        check_call("delete", trainjobs, declared=declared)


# --- RBAC -------------------------------------------------------------------------------


def _base_roles(tmp_path: Path, **configs: dict[str, Any]) -> list[dict[str, Any]]:
    for name, cfg in configs.items():
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(cfg))
    kinds = gen_manifests.added_kinds(
        str(tmp_path / "webhook.yaml") if "webhook" in configs else None,
        str(tmp_path / "descheduler.yaml") if "descheduler" in configs else None,
    )
    text = gen_manifests.rbac_files(kinds)[gen_manifests.ROOT / "manifests/base/rbac.yaml"]
    return list(yaml.safe_load_all(text.split("---\n", 1)[1]))


@pytest.mark.parametrize("which", ["webhook", "descheduler"])
def test_make_manifests_grants_the_added_kind_what_the_built_ins_get(
    tmp_path: Path, which: str
) -> None:
    entry = WEBHOOK_ENTRY if which == "webhook" else ENTRY
    roles = _base_roles(tmp_path, **{which: {"workloads": [entry]}})
    desched = [r for r in roles if r["metadata"]["name"] == "corral-descheduler"]
    for verb in ("list", "watch", "patch"):
        assert rbac.permits(desched, (verb, GROUP, PLURAL, "")), verb
        assert rbac.permits(desched, (verb, "kubeflow.org", "pytorchjobs", "")), verb
    assert not rbac.permits(desched, ("delete", GROUP, PLURAL, ""))
    webhook = [r for r in roles if r["metadata"]["name"] == "corral-webhook"]
    assert not rbac.permits(webhook, ("patch", GROUP, PLURAL, ""))


def test_without_a_switch_the_added_kind_is_read_not_patched(tmp_path: Path) -> None:
    entry = {k: v for k, v in ENTRY.items() if k != "suspendPath"}
    roles = _base_roles(tmp_path, descheduler={"workloads": [entry]})
    assert rbac.permits(roles, ("watch", GROUP, PLURAL, ""))
    assert not rbac.permits(roles, ("patch", GROUP, PLURAL, ""))


def test_without_configs_the_generated_rbac_is_the_built_ins(tmp_path: Path) -> None:
    installed = (gen_manifests.ROOT / "manifests/base/rbac.yaml").read_text()
    assert gen_manifests.rbac_files()[gen_manifests.ROOT / "manifests/base/rbac.yaml"] == installed
    assert PLURAL not in installed
    f = tmp_path / "descheduler.yaml"
    f.write_text(yaml.safe_dump({"workloads": [ENTRY]}))
    # the installed manifests lack the kind: --check with the config says so
    assert gen_manifests.main(["--check", "--descheduler-config", str(f)]) == 1


def test_make_manifests_refuses_a_bad_config_in_one_line(tmp_path: Path) -> None:
    f = tmp_path / "descheduler.yaml"
    f.write_text(yaml.safe_dump({"workloads": [{**ENTRY, "plural": "Bad"}]}))
    with pytest.raises(SystemExit) as e:
        gen_manifests.main(["--check", "--descheduler-config", str(f)])
    assert "workloads[0].plural" in str(e.value) and "\n" not in str(e.value)


def test_plan_on_a_dump_suspends_the_added_kind(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dump = tmp_path / "dump.json"
    dump.write_text(json.dumps(as_list([trainjob_crd(), *cluster()])))
    cfg = tmp_path / "descheduler.yaml"
    cfg.write_text(yaml.safe_dump({"workloads": [ENTRY]}))
    argv = ["plan", "--snapshot", str(dump), "--now", "2026-12-02T12:00:00Z", "--output", "json"]
    assert descheduler_main([*argv, "--config", str(cfg)]) == 0
    moves = json.loads(capsys.readouterr().out)["moves"]
    assert [(m["method"], m["workloads"]) for m in moves][:1] in (
        [("suspend", [f"{KIND} default/t1"])],
        [("suspend", [f"{KIND} default/t2"])],
    )
    # without the entry the TrainJob is an owner corral does not know: nothing suspended
    assert descheduler_main(argv) == 0
    moves = json.loads(capsys.readouterr().out)["moves"]
    assert all(m["method"] != "suspend" for m in moves)


# --- the descheduler against the in-memory API server ------------------------------------


async def port(kube: KubeClient, config: DeschedulerConfig) -> KubeIO:
    view = ClusterView(kube, config, ledger_namespace=NS)
    await view.start()
    await view.wait_synced(5.0)
    return KubeIO(kube, view, config, clock=lambda: NOW, ledger_namespace=NS, settle_poll=0.02)


@pytest.fixture
async def ports() -> AsyncIterator[list[KubeIO]]:
    out: list[KubeIO] = []
    try:
        yield out
    finally:
        for p in out:
            await p.view.stop()


def trainjob_in(api: ApiServer, name: str) -> Any:
    return api.store.find(api.store.resource(PLURAL, GROUP), "default", name)


async def test_the_descheduler_watches_the_added_kind_and_suspends_it(
    api: ApiServer, kube: KubeClient, ports: list[KubeIO]
) -> None:
    load(api)
    config = with_trainjob(moves={"suspend_grace": 0})
    kio = await port(kube, config)
    ports.append(kio)
    state = await kio.fetch_state()
    assert sorted(k for k in state.workloads if KIND in k) == [
        f"default/{KIND}/t1",
        f"default/{KIND}/t2",
    ]
    assert state.crd_switches is not None and state.crd_switches[KIND] is True
    # a change reaches the informer (a watch): a third TrainJob appears in a later state
    api.store.create(api.store.resource(PLURAL, GROUP), "default", trainjob("t3"))
    async with asyncio.timeout(5.0):
        while f"default/{KIND}/t3" not in (await kio.fetch_state()).workloads:
            await asyncio.sleep(0.02)
    p = plan(await kio.fetch_state(), config)
    move = p.moves[0]
    assert move.method == "suspend", move.reason
    assert move.workloads == [f"default/{KIND}/t1"] or move.workloads == [f"default/{KIND}/t2"]
    assert move.how.startswith(f"suspend {KIND} default/t")
    await kio.begin(p)
    results = list(await kio.suspend_gang(move, f"corral {p.plan_id}: {move.reason}"))
    assert [r.outcome for r in results] == [MoveOutcome.SUSPENDED]
    name = move.pods[0].name.removesuffix("-0")
    assert trainjob_in(api, name)["spec"]["suspend"] is True


async def test_without_the_config_entry_the_kind_is_not_read(
    api: ApiServer, kube: KubeClient, ports: list[KubeIO]
) -> None:
    load(api)
    config = descheduler_config({"moves": {"suspend_grace": 0}})
    kio = await port(kube, config)
    ports.append(kio)
    state = await kio.fetch_state()
    assert not any(KIND in k for k in state.workloads)
    p = plan(state, config)
    assert all(m.method != "suspend" for m in p.moves)


async def test_a_served_crd_without_the_switch_is_not_suspended(
    api: ApiServer, kube: KubeClient, ports: list[KubeIO]
) -> None:
    load(api, switch=False)
    config = with_trainjob()
    kio = await port(kube, config)
    ports.append(kio)
    state = await kio.fetch_state()
    assert state.crd_switches is not None and state.crd_switches[KIND] is False
    p = plan(state, config)
    assert all(m.method != "suspend" for m in p.moves)
