"""The one rule for "does a suspend take effect" (gangplace.engine.owners
.suspend_refusal): empty exactly when the switch is served, KubeRay's conditions hold,
Kueue does not manage the workload and its controller did not ignore a suspend before;
and what the descheduler reads of a served CRD says the same as the CRD itself."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from gangplace.engine.kinds import suspendable_kinds
from gangplace.engine.owners import (
    ANNOTATION_SUSPEND_IGNORED,
    KUEUE_QUEUE_LABEL,
    crd_switch,
    suspend_refusal,
    with_cluster_facts,
    workload_from_json,
)
from gangplace.thirdparty import crds_dir
from hypothesis import given
from hypothesis import strategies as st

from descheduler.running.cluster_view import _switch_only
from tests.builders.workload_crds import workload_crd

CRDS = crds_dir(Path(__file__).resolve().parent)

API = {k.kind: k.api_version for k in suspendable_kinds()}
KINDS = sorted(API)


def workload(
    kind: str,
    *,
    kueue: bool,
    ignored: bool,
    shutdown: bool,
    selector: bool,
    phase: str,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "w", "namespace": "ml", "uid": "uid-w"}
    if kueue:
        meta["labels"] = {KUEUE_QUEUE_LABEL: "q"}
    if ignored:
        meta["annotations"] = {ANNOTATION_SUSPEND_IGNORED: '{"why":"x"}'}
    spec: dict[str, Any] = {}
    status: dict[str, Any] = {}
    if kind == "RayJob":
        spec["shutdownAfterJobFinishes"] = shutdown
        if selector:
            spec["clusterSelector"] = {"ray.io/cluster": "shared"}
        status["jobDeploymentStatus"] = phase
    return {"apiVersion": API[kind], "kind": kind, "metadata": meta, "spec": spec, "status": status}


@given(
    kind=st.sampled_from(KINDS),
    kueue=st.booleans(),
    kueue_workload=st.booleans(),
    ignored=st.booleans(),
    shutdown=st.booleans(),
    selector=st.booleans(),
    phase=st.sampled_from(["", "New", "Initializing", "Running", "Suspended", "Complete"]),
    served=st.sampled_from([None, "missing", "declared", "absent"]),
)
def test_a_suspend_is_allowed_exactly_when_every_check_holds(
    kind: str,
    kueue: bool,
    kueue_workload: bool,
    ignored: bool,
    shutdown: bool,
    selector: bool,
    phase: str,
    served: str | None,
) -> None:
    w = workload_from_json(
        workload(
            kind, kueue=kueue, ignored=ignored, shutdown=shutdown, selector=selector, phase=phase
        )
    )
    switches = None if served is None else {}
    if served in ("declared", "absent") and switches is not None:
        switches[kind] = served == "declared"
    owned = frozenset({"uid-w"}) if kueue_workload else frozenset()
    why, by_kueue = suspend_refusal(w, switches, owned)
    ok = (
        not kueue
        and not kueue_workload
        and not ignored
        and (kind == "Job" or served == "declared")
        and (
            kind != "RayJob" or (shutdown and not selector and phase in ("Running", "Initializing"))
        )
    )
    assert (why == "") == ok, why
    assert bool(by_kueue) == (kueue or kueue_workload)
    assert with_cluster_facts(w, switches, owned).can_suspend == ok


@pytest.mark.parametrize("kind", [k for k in KINDS if k != "Job"])
@pytest.mark.parametrize("switch", [True, False])
def test_what_the_descheduler_keeps_of_a_crd_says_the_same(kind: str, switch: bool) -> None:
    crd = workload_crd(kind, switch=switch)
    assert crd_switch(crd) == (kind, switch)
    assert crd_switch(_switch_only(crd, kind, switch)) == (kind, switch)


@pytest.mark.crds
def test_the_published_crds_serve_the_switch() -> None:
    """The CRDs of the training operator (v1.7+), JobSet and KubeRay users install
    declare their switches; what the descheduler keeps of them says so too."""
    assert CRDS is not None
    found = {}
    for path in sorted(CRDS.glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        hit = crd_switch(crd)
        if hit is not None:
            found[hit[0]] = hit[1]
            assert crd_switch(_switch_only(crd, hit[0], hit[1])) == hit
    assert found == {"JobSet": True, "MPIJob": True, "PyTorchJob": True, "RayJob": True}
    # The same PyTorchJob CRD with runPolicy.suspend taken out, as v1.6 ships it.
    crd = yaml.safe_load((CRDS / "kubeflow.org_pytorchjobs.yaml").read_text())
    (version,) = crd["spec"]["versions"]
    run_policy = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"][
        "runPolicy"
    ]
    del run_policy["properties"]["suspend"]
    assert crd_switch(crd) == ("PyTorchJob", False)
