"""One registry of workload kinds (gangplace.engine.kinds.KINDS), and nothing beside it.

A kind is known in one place: what the webhook makes a gang of, what the informers
read, what the RBAC grants, how a gang of it moves. These tests fail when a second
table of kinds appears in the product's code, and when a registered kind lacks any of
what its entry promises."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from gangplace.engine import PodRecord
from gangplace.engine.kinds import KINDS, WorkloadKind, gang_kinds
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
        'def f(kind, group, obj):\n'
        '    if kind != "RayJob":\n'
        '        return ""\n'
        '    if (group, kind) != ("jobset.x-k8s.io", "JobSet"):\n'
        '        return []\n'
        '    match kind:\n'
        '        case "SparkApplication":\n'
        '            return 1\n'
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
