"""A suspended workload has no PodGroup: none at admission of a workload created
suspended, one made when an UPDATE resumes it, removed when an UPDATE suspends it
(only corral's, only this workload's); a suspension by corral's descheduler is left to
the descheduler. admit() and the reconciler, without an API server."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from tests.builders.reviews import checked, pod_template, review
from webhook.admission.suspension import change, is_suspended
from webhook.podgroup_intent import OwnerRef, PodGroupIntent
from webhook.podgroups.reconciler import PodGroupReconciler, RetryPolicy

GPU = {"nvidia.com/gpu": "1"}
UID = "5b2f0d8e-0000-4000-8000-000000000001"
FAST = RetryPolicy(attempts=3, base_delay=0.001, max_delay=0.002, owner_wait=0.2, hint_wait=0)


def job(*, suspend: bool, workers: int = 2) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train", "namespace": "ml"},
        "spec": {"parallelism": workers, "suspend": suspend, "template": pod_template(GPU)},
    }


def pytorchjob(*, suspend: bool) -> dict[str, Any]:
    worker = {"replicas": 2, "template": pod_template(GPU)}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "pt", "namespace": "ml"},
        "spec": {
            "runPolicy": {"suspend": suspend},
            "pytorchReplicaSpecs": {"Master": {**worker, "replicas": 1}, "Worker": worker},
        },
    }


def admitted(obj: dict[str, Any], group: str) -> dict[str, Any]:
    """The object as stored after its CREATE admission, with the uid the API gave it."""
    api = obj["apiVersion"].rpartition("/")[2]
    result, patched = checked(review(obj, group=group, version=api))
    assert result.allowed
    patched["metadata"]["uid"] = UID
    return patched


def update(old: dict[str, Any], new: dict[str, Any], group: str) -> Any:
    rev = review(new, group=group, version=new["apiVersion"].rpartition("/")[2])
    rev["request"]["operation"] = "UPDATE"
    rev["request"]["oldObject"] = old
    result, _ = checked(rev)
    assert result.allowed
    assert result.patch == []  # an UPDATE is never patched
    return result


def flipped(obj: dict[str, Any], on: bool, **annotations: str) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    if out["kind"] == "Job":
        out["spec"]["suspend"] = on
    else:
        out["spec"]["runPolicy"]["suspend"] = on
    if annotations:
        out["metadata"].setdefault("annotations", {}).update(annotations)
    return out


@pytest.mark.parametrize(
    ("make", "group"), [(job, "batch"), (pytorchjob, "kubeflow.org")], ids=["Job", "PyTorchJob"]
)
def test_created_suspended_it_is_a_gang_without_a_podgroup(make: Any, group: str) -> None:
    obj = make(suspend=True)
    api = obj["apiVersion"].rpartition("/")[2]
    result, patched = checked(review(obj, group=group, version=api))
    assert result.allowed and result.intents == ()
    # Its templates still carry the gang keys: resumed, its pods join the gang.
    assert result.outcome == "patched"
    spec = patched["spec"]
    tmpl = (
        spec["template"]
        if "template" in spec
        else spec["pytorchReplicaSpecs"]["Worker"]["template"]
    )
    assert "scheduling.k8s.io/group-name" in tmpl["metadata"]["annotations"]
    running, _ = checked(review(make(suspend=False), group=group, version=api))
    assert len(running.intents) == 1 and not running.intents[0].remove


def test_resumed_it_gets_its_podgroup_and_suspended_again_it_loses_it() -> None:
    stored = admitted(job(suspend=True), "batch")
    resumed = flipped(stored, False)
    (made,) = update(stored, resumed, "batch").intents
    assert (made.name, made.update, made.remove) == ("job-train", True, False)
    assert made.owner == OwnerRef("batch/v1", "Job", "train", UID)
    assert made.body["spec"]["minMember"] == 2
    assert made.body["spec"]["minResources"]["nvidia.com/gpu"] == "2"
    (gone,) = update(resumed, flipped(resumed, True), "batch").intents
    assert (gone.name, gone.remove, gone.owner) == ("job-train", True, made.owner)


def test_resumed_and_scaled_at_once_the_podgroup_has_the_new_size() -> None:
    # Kueue's partial admission changes parallelism as it resumes a Job.
    stored = admitted(job(suspend=True, workers=4), "batch")
    resumed = flipped(stored, False)
    resumed["spec"]["parallelism"] = 3
    (made,) = update(stored, resumed, "batch").intents
    assert made.body["spec"]["minMember"] == 3


def test_while_suspended_an_update_makes_no_podgroup() -> None:
    stored = admitted(job(suspend=True, workers=4), "batch")
    scaled = copy.deepcopy(stored)
    scaled["spec"]["parallelism"] = 8
    result = update(stored, scaled, "batch")
    assert result.intents == () and "suspended" in result.reason


def test_a_suspension_by_the_descheduler_is_left_to_it() -> None:
    stored = admitted(job(suspend=False), "batch")
    mark = '{"at":"2026-12-03T09:00:00Z","for":"ml/job-big","plan":"p1"}'
    result = update(stored, flipped(stored, True, **{"corral.dev/suspended-by": mark}), "batch")
    assert result.intents == () and "descheduler" in result.reason
    # Its resume (mark removed) asks for the PodGroup as any resume does: the
    # descheduler made it first, and an existing PodGroup of this owner is kept.
    held = flipped(stored, True, **{"corral.dev/suspended-by": mark})
    back = flipped(held, False)
    del back["metadata"]["annotations"]["corral.dev/suspended-by"]
    (made,) = update(held, back, "batch").intents
    assert made.update and not made.remove


def test_pytorchjob_suspended_by_a_person_loses_its_podgroup() -> None:
    stored = admitted(pytorchjob(suspend=False), "kubeflow.org")
    (gone,) = update(stored, flipped(stored, True), "kubeflow.org").intents
    assert gone.remove and gone.name == "pytorchjob-pt"


def test_the_switch_read_where_the_registry_says() -> None:
    assert is_suspended("batch", "Job", job(suspend=True))
    assert not is_suspended("batch", "Job", job(suspend=False))
    assert is_suspended("kubeflow.org", "PyTorchJob", pytorchjob(suspend=True))
    assert not is_suspended("ray.io", "RayCluster", {"spec": {"suspend": True}})  # no switch
    assert not is_suspended("batch", "Job", {"spec": {"suspend": "true"}})  # not a boolean
    # A Volcano Job is not a batch/v1 Job: the registry has no switch for it.
    assert not is_suspended("batch.volcano.sh", "Job", job(suspend=True))
    assert change("batch", "Job", None, job(suspend=True)) is None  # no old object
    assert change("batch", "Job", job(suspend=False), job(suspend=True)) == "suspended"
    assert change("batch", "Job", job(suspend=True), job(suspend=False)) == "resumed"


# --- the reconciler ---------------------------------------------------------------------

API = "scheduling.volcano.sh/v1beta1"
OWNER = OwnerRef("batch/v1", "Job", "train", UID)


def intent(*, remove: bool = False, update: bool = False) -> PodGroupIntent:
    body = {
        "apiVersion": API,
        "kind": "PodGroup",
        "metadata": {"name": "job-train", "namespace": "ml"},
        "spec": {"minMember": 2},
    }
    return PodGroupIntent(
        API,
        "podgroups",
        "ml",
        "job-train",
        {} if remove else body,
        OWNER,
        remove=remove,
        update=update,
    )


class Store:
    """PodGroups by name, with create and remove as PodGroupApi's."""

    def __init__(self) -> None:
        self.pgs: dict[str, dict[str, Any]] = {}
        self.removes = 0
        self.fail: list[int] = []

    async def create(self, i: PodGroupIntent, body: dict[str, Any]) -> None:
        await asyncio.sleep(0)
        if i.name in self.pgs:
            err = Exception("conflict")
            err.status = 409  # type: ignore[attr-defined]
            raise err
        self.pgs[i.name] = body

    async def remove(self, i: PodGroupIntent, owner: OwnerRef) -> Any:
        await asyncio.sleep(0)
        self.removes += 1
        if self.fail:
            err = Exception("unavailable")
            err.status = self.fail.pop(0)  # type: ignore[attr-defined]
            raise err
        pg = self.pgs.get(i.name)
        if pg is None:
            return "absent"
        refs = pg["metadata"].get("ownerReferences") or []
        if not any(r["uid"] == owner.uid for r in refs):
            return "foreign"
        del self.pgs[i.name]
        return "removed"


async def run(rec: PodGroupReconciler, *intents: PodGroupIntent) -> None:
    await rec.start()
    try:
        for i in intents:
            rec.submit(i, dry_run=False)
        await asyncio.wait_for(rec.drain(), 5)
    finally:
        await rec.stop()


async def test_removed_then_made_again_when_resumed() -> None:
    store = Store()
    outcomes: list[str] = []
    rec = PodGroupReconciler(
        store.create, policy=FAST, remove=store.remove, on_outcome=lambda _i, o: outcomes.append(o)
    )
    await run(rec, intent())
    await run(rec, intent(remove=True))
    assert store.pgs == {}
    # The PodGroup was made once and remembered; removing it forgot that, so a plain
    # intent (a pod of the resumed workload) makes it again.
    await run(rec, intent())
    assert "job-train" in store.pgs
    assert outcomes == ["created", "removed", "created"]


async def test_removal_retried_and_never_of_another_owners_podgroup() -> None:
    store = Store()
    store.fail = [503]
    outcomes: list[str] = []
    rec = PodGroupReconciler(
        store.create, policy=FAST, remove=store.remove, on_outcome=lambda _i, o: outcomes.append(o)
    )
    await run(rec, intent(remove=True))
    assert store.removes == 2 and outcomes == ["absent"]
    store.pgs["job-train"] = {"metadata": {"ownerReferences": [{"uid": "someone-else"}]}}
    await run(rec, intent(remove=True))
    assert "job-train" in store.pgs and outcomes[-1] == "foreign"


async def test_suspend_then_resume_queued_together_ends_with_the_podgroup() -> None:
    store = Store()
    rec = PodGroupReconciler(store.create, policy=FAST, remove=store.remove, workers=1)
    await run(rec, intent())
    await run(rec, intent(remove=True), intent(update=True))
    assert "job-train" in store.pgs
    await run(rec, intent(update=True), intent(remove=True))
    assert store.pgs == {}


async def test_no_removal_without_a_remove_function_or_an_owner_uid() -> None:
    store = Store()
    rec = PodGroupReconciler(store.create, policy=FAST)
    await rec.start()
    try:
        assert not rec.submit(intent(remove=True), dry_run=False)
        assert not rec.submit(intent(remove=True), dry_run=True)
    finally:
        await rec.stop()


# --- a PodGroup made when its pods come without one ---------------------------------------


class Workloads:
    """OwnerPodGroups' ``read``: stored workloads by name, counting reads."""

    def __init__(self, *objs: dict[str, Any]) -> None:
        self.objs = {o["metadata"]["name"]: o for o in objs}
        self.reads = 0

    async def read(self, namespace: str, owner: OwnerRef) -> dict[str, Any] | None:
        self.reads += 1
        return self.objs.get(owner.name)


def pod_hint() -> Any:
    from webhook.podgroup_intent import OwnerHint

    return OwnerHint(API, "ml", "job-train", OWNER)


async def test_a_pod_without_a_known_podgroup_brings_it_once() -> None:
    from webhook.config import WebhookConfig
    from webhook.podgroups.from_workload import OwnerPodGroups

    store = Store()
    stored = admitted(job(suspend=False, workers=3), "batch")
    live = Workloads(stored)
    rec = PodGroupReconciler(
        store.create, policy=FAST, ensure=OwnerPodGroups(live.read, WebhookConfig())
    )
    await rec.start()
    try:
        rec.hint(pod_hint())
        await asyncio.wait_for(rec.drain(), 5)
        assert store.pgs["job-train"]["spec"]["minMember"] == 3
        refs = store.pgs["job-train"]["metadata"]["ownerReferences"]
        assert refs[0]["uid"] == UID
        for _ in range(5):  # the gang's other pods: no more reads
            rec.hint(pod_hint())
        await asyncio.wait_for(rec.drain(), 5)
        assert live.reads == 1
    finally:
        await rec.stop()


async def test_a_pod_of_a_suspended_workload_brings_no_podgroup() -> None:
    from webhook.config import WebhookConfig
    from webhook.podgroups.from_workload import OwnerPodGroups

    store = Store()
    live = Workloads(admitted(job(suspend=True), "batch"))
    rec = PodGroupReconciler(
        store.create, policy=FAST, ensure=OwnerPodGroups(live.read, WebhookConfig())
    )
    await rec.start()
    try:
        rec.hint(pod_hint())
        await asyncio.wait_for(rec.drain(), 5)
        assert store.pgs == {} and live.reads == 1
        # Resumed later: the next pod looks again, and makes it.
        live.objs["train"] = flipped(live.objs["train"], False)
        rec.hint(pod_hint())
        await asyncio.wait_for(rec.drain(), 5)
        assert "job-train" in store.pgs
    finally:
        await rec.stop()


async def test_a_gang_corral_did_not_name_is_left_to_its_owner() -> None:
    from webhook.config import WebhookConfig
    from webhook.podgroup_intent import OwnerHint
    from webhook.podgroups.from_workload import OwnerPodGroups

    obj = job(suspend=False)
    tmpl = obj["spec"]["template"]
    tmpl.setdefault("metadata", {}).setdefault("annotations", {})[
        "scheduling.k8s.io/group-name"
    ] = "theirs"
    obj["spec"]["template"]["spec"]["schedulerName"] = "volcano"
    stored = admitted(obj, "batch")
    ensure = OwnerPodGroups(Workloads(stored).read, WebhookConfig())
    assert await ensure(OwnerHint(API, "ml", "theirs", OWNER)) is False
    # The reconciler asks once for the gang's pods, and makes nothing.
    store, live = Store(), Workloads(stored)
    rec = PodGroupReconciler(
        store.create, policy=FAST, ensure=OwnerPodGroups(live.read, WebhookConfig())
    )
    await rec.start()
    try:
        for _ in range(3):
            rec.hint(OwnerHint(API, "ml", "theirs", OWNER))
            await asyncio.wait_for(rec.drain(), 5)
    finally:
        await rec.stop()
    assert store.pgs == {} and live.reads == 1
