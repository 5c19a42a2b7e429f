"""One reader of gang membership (gangplace.engine.membership.read_membership): what the
webhook writes in each backend's keys, the webhook, the descheduler and the plugin read
back as the same gang; YuniKorn's application is read where YuniKorn reads it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from gangplace.engine import PodRecord
from gangplace.engine import membership as G
from gangplace.engine.membership import DIALECTS, membership, read_membership

from webhook.admission.backends.dialect import GangInfo, TaskGroup, foreign_gang
from webhook.admission.backends.registry import BACKENDS, dialect_for
from webhook.admission.native_gangs import Served
from webhook.config import Backend

ROOT = Path(__file__).resolve().parents[2]
GANG = GangInfo("train", 2, 2, "research", 60)
TASKS = [TaskGroup("worker", 2, {"cpu": "1"})]


def _record(labels: dict[str, str], annotations: dict[str, str]) -> PodRecord:
    from gangplace.engine.model import PodShape

    return PodRecord("ns", "p", PodShape(), labels=labels, annotations=annotations)


# KAI's pod grouper, not corral, names a pod's PodGroup (webhook/admission/backends/kai.py):
# tested below.
@pytest.mark.parametrize("backend", [b.value for b in Backend if b is not Backend.KAI])
def test_what_the_webhook_writes_every_reader_reads_as_that_gang(backend: str) -> None:
    dialect = dialect_for(backend)
    keys = dialect.member_keys(GANG, role="worker", task_groups=TASKS)
    meta = {"labels": keys.labels, "annotations": keys.annotations}
    assert dialect.membership(meta) == "train"
    m = read_membership(backend, keys.labels, keys.annotations)
    assert m is not None and (m.gang, m.dialect) == ("train", backend)
    seen = membership(_record(keys.labels, keys.annotations))
    assert seen is not None and (seen.gang, seen.dialect) == ("train", backend)


def test_a_pod_kais_grouper_named_reads_as_that_gang_with_corrals_queue() -> None:
    """corral writes the queue and the minimum KAI's pod grouper reads; the grouper then
    names the pod's PodGroup in ``pod-group-name``, which every reader reads."""
    dialect = dialect_for("kai")
    keys = dialect.member_keys(GANG, role="worker", task_groups=TASKS)
    assert dialect.membership({"labels": keys.labels, "annotations": keys.annotations}) is None
    grouped = {**keys.annotations, G.KAI_POD_GROUP: "pg-train"}
    assert dialect.membership({"labels": keys.labels, "annotations": grouped}) == "pg-train"
    seen = membership(_record(keys.labels, grouped))
    assert seen is not None and (seen.gang, seen.dialect, seen.queue) == (
        "pg-train",
        "kai",
        "research",
    )
    assert foreign_gang({"annotations": grouped}, None, "volcano") == G.KAI_POD_GROUP


def test_a_backend_is_made_once_per_name_and_what_is_served() -> None:
    assert dialect_for("volcano") is dialect_for("volcano")
    assert dialect_for("volcano") is not dialect_for("coscheduling")
    served = Served(volcano_podgroup_fields=frozenset({"networkTopology"}))
    assert dialect_for("volcano", served) is not dialect_for("volcano")
    assert dialect_for("volcano", served).served is served


def test_every_backend_the_config_names_has_one_class() -> None:
    assert set(BACKENDS) == {b.value for b in Backend}
    assert all(cls.name == name for name, cls in BACKENDS.items())


def test_a_pod_in_a_native_gang_someone_else_set_is_foreign() -> None:
    assert foreign_gang({}, {"workloadRef": {"name": "w"}}, "volcano") == "workloadRef"
    assert foreign_gang({}, {"schedulingGroup": {"podGroupName": "g"}}, "kubernetes") == (
        "schedulingGroup"
    )
    assert foreign_gang({}, {"containers": []}, "volcano") is None


def test_yunikorn_reads_the_application_in_k8shims_order() -> None:
    """yunikorn-k8shim v1.5+ GetApplicationIDFromPod: label yunikorn.apache.org/app-id,
    then that annotation, then label applicationId."""
    tasks = {G.YUNIKORN_TASK_GROUP_NAME: "worker"}
    every = {G.YUNIKORN_APP_ID: "canonical", G.YUNIKORN_APP_ID_LABEL: "legacy"}
    m = read_membership("yunikorn", every, {**tasks, G.YUNIKORN_APP_ID: "annotated"})
    assert m is not None and (m.gang, m.key) == ("canonical", G.YUNIKORN_APP_ID)
    m = read_membership(
        "yunikorn", {G.YUNIKORN_APP_ID_LABEL: "legacy"}, {**tasks, G.YUNIKORN_APP_ID: "ann"}
    )
    assert m is not None and m.gang == "ann"
    m = read_membership("yunikorn", {G.YUNIKORN_APP_ID_LABEL: "legacy"}, tasks)
    assert m is not None and (m.gang, m.key) == ("legacy", G.YUNIKORN_APP_ID_LABEL)


def test_a_yunikorn_application_is_a_gang_only_with_task_groups() -> None:
    labels = {G.YUNIKORN_APP_ID_LABEL: "app"}
    assert read_membership("yunikorn", labels, {}) is None
    assert membership(_record(labels, {})) is None
    # The webhook keeps a pod's application (and adds the task groups to it).
    assert dialect_for("yunikorn").membership({"labels": labels}) == ("app")
    # Under another backend, a YuniKorn application's pod is left alone.
    assert foreign_gang({"labels": labels}, None, "volcano") == G.YUNIKORN_APP_ID_LABEL
    assert foreign_gang({"labels": labels}, None, "yunikorn") is None


def test_an_unknown_dialect_is_named() -> None:
    with pytest.raises(ValueError, match="dialect 'slurm': expected one of volcano, "):
        read_membership("slurm", {}, {})
    assert "corral" in DIALECTS


# The keys that name a gang: only the one reader looks them up.
_GANG_KEYS = frozenset(
    {
        "VOLCANO_GROUP_NAME",
        "COSCHED_POD_GROUP_LABEL",
        "KUEUE_POD_GROUP_LABEL",
        "YUNIKORN_APP_ID",
        "YUNIKORN_APP_ID_LABEL",
    }
)


def _lookups(path: Path) -> list[int]:
    """Lines where ``path`` reads a gang key out of a map (``m.get(KEY)``, ``m[KEY]``)."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text())):
        key: ast.AST | None = None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr == "get" and node.args:
                key = node.args[0]
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            key = node.slice
        name = (
            key.id
            if isinstance(key, ast.Name)
            else key.attr
            if isinstance(key, ast.Attribute)
            else None
        )
        if name in _GANG_KEYS:
            lines.append(getattr(node, "lineno", 0))
    return lines


def test_no_second_membership_reader() -> None:
    reader = ROOT / "shared/gangplace/engine/membership.py"
    found = []
    for top in ("webhook", "descheduler", "kubectl_corral", "shared/gangplace"):
        for path in sorted((ROOT / top).rglob("*.py")):
            if path != reader:
                found += [f"{path.relative_to(ROOT)}:{n}" for n in _lookups(path)]
    assert found == [], "read gang keys through gangplace.engine.membership.read_membership"
    assert _lookups(reader), "the scan finds the reader's own lookups"
