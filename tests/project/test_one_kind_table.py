"""One registry of workload kinds (gangplace.engine.kinds.KINDS), and nothing beside it.

A kind is known in one place: what the webhook makes a gang of, what the informers
read, what the RBAC grants, how a gang of it moves. These tests fail when a second
table of kinds appears in the product's code, and when a registered kind lacks any of
what its entry promises."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest
import yaml
from gangplace.engine import PodRecord
from gangplace.engine.kinds import KINDS, KindHooks, WorkloadKind, gang_kinds, with_added
from gangplace.engine.model import PodShape
from gangplace.engine.owners import WorkloadRecord, workload_from_json
from gangplace.kube import rbac
from gangplace.kube.resources import (
    API_CALLS,
    DESCHEDULER_WORKLOADS,
    SUSPENDABLE_WORKLOADS,
    WORKLOADS,
    workload_resource,
)
from gangplace.thirdparty import crds_dir

from descheduler import parse_config as descheduler_config
from descheduler.planning.move_method import Owners
from webhook.config import parse_config

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("webhook", "descheduler", "kubectl_corral", "shared/gangplace", "bench", "scripts")
REGISTRY = ROOT / "shared/gangplace/engine/kinds.py"
NAMES = frozenset(k.kind for k in KINDS.values())


def _kind_names(node: ast.AST) -> list[str]:
    """The registered kind names a literal lists (as dict keys or as elements)."""
    if isinstance(node, ast.Dict):
        items: list[ast.AST | None] = list(node.keys)
    elif isinstance(node, (ast.Set, ast.List, ast.Tuple)):
        items = list(node.elts)
    else:
        return []
    return [
        i.value
        for i in items
        if isinstance(i, ast.Constant) and isinstance(i.value, str) and i.value in NAMES
    ]


def second_tables(root: Path = ROOT) -> list[str]:
    """``path:line: names`` of each literal outside the registry that lists two or more
    kinds: a table of kinds that is not derived from the registry."""
    found = []
    for top in PRODUCT:
        for path in sorted((root / top).rglob("*.py")):
            if path == REGISTRY or ".venv" in path.parts:
                continue
            tree = ast.parse(path.read_text(), str(path))
            for node in ast.walk(tree):
                names = _kind_names(node)
                if len(set(names)) >= 2:
                    rel = path.relative_to(root)
                    found.append(f"{rel}:{getattr(node, 'lineno', 0)}: {sorted(set(names))}")
    return found


def test_no_second_table_of_kinds() -> None:
    assert second_tables() == [], "derive it from gangplace.engine.kinds.KINDS instead"


def test_the_scan_finds_a_second_table(tmp_path: Path) -> None:
    mod = tmp_path / "webhook" / "extra.py"
    mod.parent.mkdir()
    mod.write_text('SUSPENDABLE = {"Job": ("spec", "suspend"), "JobSet": ("spec", "suspend")}\n')
    (found,) = second_tables(tmp_path)
    assert found.startswith("webhook/extra.py:1:") and "'JobSet'" in found


QUIRKS = ROOT / "shared/gangplace/engine/quirks"
# What pip installs. The scripts and the bench are left out: they build sample clusters
# of named kinds (a trace's Jobs), data rather than a kind's behaviour.
SHIPPED = ("webhook", "descheduler", "kubectl_corral", "shared/gangplace")


def _names_in(node: ast.AST) -> list[str]:
    """The registered kind names ``node`` is, or a literal of it lists."""
    if isinstance(node, ast.Constant):
        return [node.value] if isinstance(node.value, str) and node.value in NAMES else []
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [n for e in node.elts for n in _names_in(e)]
    return []


def kind_tests(root: Path = ROOT) -> list[str]:
    """``path:line: names`` of each comparison (``==``, ``!=``, ``in``, a ``match``
    case) with a registered kind's name outside the registry and its quirks: a quirk
    decided by the kind's name instead of its entry's hook."""
    found = []
    for top in SHIPPED:
        for path in sorted((root / top).rglob("*.py")):
            if path == REGISTRY or path.is_relative_to(QUIRKS) or ".venv" in path.parts:
                continue
            tree = ast.parse(path.read_text(), str(path))
            for node in ast.walk(tree):
                if isinstance(node, ast.Compare):
                    operands = [node.left, *node.comparators]
                elif isinstance(node, ast.MatchValue):
                    operands = [node.value]
                else:
                    continue
                names = sorted({n for o in operands for n in _names_in(o)})
                if names:
                    rel = path.relative_to(root)
                    found.append(f"{rel}:{getattr(node, 'lineno', 0)}: {names}")
    return found


def test_no_quirk_tests_a_kinds_name() -> None:
    assert kind_tests() == [], "ask the kind's entry (its hooks in gangplace.engine.kinds)"


def test_the_scan_finds_a_kind_test(tmp_path: Path) -> None:
    """The shapes the quirks had before they moved into the registry's hooks."""
    mod = tmp_path / "shared/gangplace/engine/extra.py"
    mod.parent.mkdir(parents=True)
    mod.write_text(
        "def f(kind, group, obj):\n"
        '    if kind != "RayJob":\n'
        '        return ""\n'
        '    if (group, kind) != ("jobset.x-k8s.io", "JobSet"):\n'
        "        return []\n"
        "    match kind:\n"
        '        case "SparkApplication":\n'
        "            return 1\n"
        '    return obj.get("kind") in {"Pod", "MPIJob"} or kind == "Pod"\n'
    )
    assert kind_tests(tmp_path) == [
        "shared/gangplace/engine/extra.py:2: ['RayJob']",
        "shared/gangplace/engine/extra.py:4: ['JobSet']",
        "shared/gangplace/engine/extra.py:7: ['SparkApplication']",
        "shared/gangplace/engine/extra.py:9: ['MPIJob']",
    ]


def test_the_registry_refuses_a_kind_twice() -> None:
    from gangplace.engine.kinds import registry

    job = KINDS[("batch", "Job")]
    with pytest.raises(ValueError, match="kind Job of group 'batch' is registered twice"):
        registry([job, job])


def _calls(verb: str, r: WorkloadKind) -> bool:
    return any(
        (c.verb, c.group, c.resource) == (verb, r.group, r.plural) and not c.subresource
        for c in API_CALLS
    )


@pytest.mark.parametrize("record", list(KINDS.values()), ids=lambda r: f"{r.group}/{r.kind}")
def test_every_kind_has_what_its_entry_promises(record: WorkloadKind) -> None:
    res = (record.group, record.plural, record.kind)
    if record.makes_gangs:
        # the webhook reads the gang's owner (its uid) when no pod named it
        assert res in {(r.group, r.plural, r.kind) for r in WORKLOADS}
        assert _calls("get", record)
        assert rbac.allowed(rbac.WEBHOOK, "get", workload_resource(record.group, record.kind))
    if record.read:
        # an informer, granted to the descheduler
        resource = workload_resource(record.group, record.kind)
        assert resource in DESCHEDULER_WORKLOADS
        assert _calls("list", record) and _calls("watch", record)
        assert rbac.allowed(rbac.DESCHEDULER, "watch", resource)
        # a record of it is read from the API's JSON
        w = workload_from_json(
            {
                "apiVersion": record.api_version,
                "kind": record.kind,
                "metadata": {"name": "w", "namespace": "ns"},
            }
        )
        assert (w.group, w.kind, w.suspend_path) == (
            record.group,
            record.kind,
            record.suspend_path,
        )
    if record.read and record.suspend_path:
        resource = workload_resource(record.group, record.kind)
        assert resource in SUSPENDABLE_WORKLOADS
        assert rbac.allowed(rbac.DESCHEDULER, "patch", resource)
    if not record.read:
        assert not _calls("watch", record), "an informer of a kind nobody reads"


def _pod(group: str, kind: str, name: str = "p") -> PodRecord:
    return PodRecord(
        "ns",
        name,
        PodShape(requests=(("cpu", 1000),), gpu_count=1, gpu_milli=1000),
        node_name="n1",
        owner_kind=kind,
        owner_name="owner",
        owner_group=group,
    )


@pytest.mark.parametrize("record", list(KINDS.values()), ids=lambda r: f"{r.group}/{r.kind}")
def test_every_kind_has_a_move_method(record: WorkloadKind) -> None:
    """How an evicted pod of each kind comes back decides whether it may be evicted."""
    job = WorkloadRecord(
        "Job", "batch", "ns", "owner", backoff_limit=6, suspend_path=("spec", "suspend")
    )
    owners = Owners({job.key: job} if record.key == ("batch", "Job") else {})
    way = owners.way("u", [_pod(record.group, record.kind)], whole=False, suspend=False)
    if record.evicted in ("recreated", "job-failures"):
        assert way.method == "evict", way.reason
    else:
        assert way.method is None
        assert (
            "is not made again without loss" in way.reason
            or "is not known to make an evicted pod again" in way.reason
        ), way.reason


def test_a_volcano_job_is_not_a_batch_job() -> None:
    """A Volcano ``batch.volcano.sh`` Job shares the name Job: it is neither read as a
    batch/v1 Job's record nor evicted on a batch/v1 Job's backoffLimit."""
    batch = WorkloadRecord(
        "Job", "batch", "ns", "owner", backoff_limit=6, suspend_path=("spec", "suspend")
    )
    owners = Owners({batch.key: batch})
    assert owners.chain_top("ns", "batch", "Job", "owner")[0] is batch
    assert owners.chain_top("ns", "batch.volcano.sh", "Job", "owner") == (None, "")
    way = owners.way("u", [_pod("batch.volcano.sh", "Job")], whole=True, suspend=True)
    assert way.method is None
    assert way.reason == (
        "not movable: owner Job ns/owner is not known to make an evicted pod again without loss"
    )
    with pytest.raises(ValueError, match=r"Job \(batch.volcano.sh/v1alpha1\): not a workload"):
        workload_from_json(
            {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "j"}}
        )


def test_the_webhook_table_is_the_registrys_plus_the_config() -> None:
    config = parse_config({})
    assert [(k.group, k.kind) for k in config.table.kinds()] == [
        (k.group, k.kind) for k in gang_kinds()
    ]


# --- one record type per kind -----------------------------------------------------------

TRAINJOB: dict[str, Any] = {
    "group": "example.com",
    "versions": ["v1"],
    "kind": "TrainJob",
    "suspendPath": "spec.suspend",
    "roles": [{"at": "spec.replicatedJobs.*", "template": "template", "count": ["replicas"]}],
}


def test_one_record_type_describes_a_kind() -> None:
    """The registry's records and both configs' ``workloads:`` entries are one type: an
    added entry is itself the record the registry holds (nothing converts one into
    another), and the same entry in both configs is the same record."""
    assert {type(r) for r in KINDS.values()} == {WorkloadKind}
    web = parse_config({"workloads": [TRAINJOB]})
    desched = descheduler_config({"workloads": [TRAINJOB]})
    for cfg in (web, desched):
        (added,) = cfg.workloads
        assert type(added) is WorkloadKind and cfg.kinds[added.key] is added
        assert (added.plural, added.version, added.suspend_path) == (
            "trainjobs",
            "v1",
            ("spec", "suspend"),
        )
    assert web.workloads == desched.workloads


def test_an_added_kind_has_no_quirks() -> None:
    """A kind added in a config gets the hooks' defaults, even one shaped like a
    JobSet: its name and shape say nothing."""
    like_jobset = {**TRAINJOB, "group": "example.com", "kind": "JobSet"}
    (added,) = parse_config({"workloads": [like_jobset]}).workloads
    assert added.hooks == KindHooks() and added.read and not added.steps
    jobset = {"spec": {"replicatedJobs": [{"name": "w", "replicas": 2, "template": {}}]}}
    assert KINDS[("jobset.x-k8s.io", "JobSet")].hooks.subgroups(jobset) != []
    assert added.hooks.subgroups(jobset) == []
    assert added.hooks.suspend_refusal({"spec": {}}, "TrainJob ns/t") == ""
    assert added.hooks.self_ganged({"spec": {"completionMode": "Indexed"}}) is None
    assert added.hooks.disruption_rule({"spec": {}}) == (None, [])


def test_only_the_built_in_table_says_read_steps_and_hooks() -> None:
    """What a config cannot say is no config key: it is refused like any unknown one."""
    for key in ("read", "steps", "hooks"):
        with pytest.raises(ValueError, match=rf"workloads\.0\.{key}: unknown key"):
            descheduler_config({"workloads": [{**TRAINJOB, key: True}]})


def test_the_webhook_needs_an_added_kinds_roles() -> None:
    entry = {k: v for k, v in TRAINJOB.items() if k != "roles"}
    with pytest.raises(ValueError) as e:
        parse_config({"workloads": [entry]})
    msg = str(e.value)
    assert "workloads[0].roles: missing for TrainJob of group 'example.com'" in msg, msg
    assert "\n" not in msg
    # the descheduler reads no roles: the same entry is whole there
    assert with_added(descheduler_config({"workloads": [entry]}).workloads)


@pytest.mark.crds
def test_corral_reads_each_kind_in_a_version_its_crd_stores() -> None:
    """The version corral reads and writes a kind in (the first of its versions: its
    informers, suspend patches and RBAC) is the one the published CRD stores. MPIJob:
    mpi-operator's CRD serves v2beta1 only; the webhook admits the training
    operator's kubeflow.org/v1 too."""
    found = crds_dir(ROOT)
    assert found is not None
    seen = {}
    for path in sorted(found.glob("*.yaml")):
        spec = yaml.safe_load(path.read_text())["spec"]
        record = KINDS.get((spec["group"], spec["names"]["kind"]))
        if record is None:
            continue
        stored = [v["name"] for v in spec["versions"] if v.get("storage") and v.get("served")]
        seen[record.kind] = stored
        assert stored == [record.version], (record.kind, stored, record.versions)
        assert record.plural == spec["names"]["plural"]
    assert seen["MPIJob"] == ["v2beta1"]
    assert KINDS[("kubeflow.org", "MPIJob")].versions == ("v2beta1", "v1")
