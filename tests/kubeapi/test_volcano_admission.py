"""The model of Volcano's ``/pods/validate``: which stacks run it, every check it makes
on a pod CREATE and its messages as the API server returns them."""

from __future__ import annotations

from typing import Any

import pytest

from tests.builders import objects as b
from tests.controllers.rest import Rest, RestError
from tests.kubeapi import ApiServer
from tests.kubeapi.versions import VOLCANO_VERSIONS, Versions

Json = dict[str, Any]
NS = "ml"
DENIED = 'admission webhook "validatepod.volcano.sh" denied the request: '


def pod(name: str, annotations: Json | None = None, scheduler: str = "volcano") -> Json:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": dict(annotations or {})},
        "spec": {"schedulerName": scheduler, "containers": [{"name": "c", "image": "busybox"}]},
    }


def podgroup(name: str, queue: str | None = None) -> Json:
    spec: Json = {"minMember": 1}
    if queue is not None:
        spec["queue"] = queue
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": NS},
        "spec": spec,
    }


async def create(api: ApiServer, body: Json, namespace: str = NS) -> str:
    """ "" when the pod is created, else the API server's message."""
    rest = Rest(api.url)
    try:
        await rest.create("v1", "pods", namespace, body)
    except RestError as e:
        assert e.status == 400
        assert isinstance(e.body, dict) and "reason" not in e.body
        return str(e.body["message"])
    finally:
        await rest.close()
    return ""


def cluster(api: ApiServer) -> None:
    api.store.load(
        [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "volcano-system"}},
            b.queue("shut", state="Closed"),
            podgroup("ready", "default"),
            podgroup("noqueue"),
            podgroup("closed", "shut"),
            podgroup("lost", "nowhere"),
        ]
    )


def test_on_by_default_through_1_11() -> None:
    on = {
        str(v)
        for v in VOLCANO_VERSIONS
        if Versions(volcano=v, volcano_pod_validation=None).validates_volcano_pods
    }
    assert on == {"1.7", "1.8", "1.9", "1.10", "1.11"}
    assert not Versions.of(volcano=None).validates_volcano_pods
    assert Versions.of(volcano="1.12", volcano_pod_validation=True).validates_volcano_pods


@pytest.mark.parametrize("volcano", ["1.7", "1.10", "1.11"])
async def test_every_check_and_its_message(volcano: str) -> None:
    async with ApiServer(versions=Versions.of(kube="1.30", volcano=volcano)) as api:
        cluster(api)
        assert api.volcano_admission is not None
        group = "scheduling.k8s.io/group-name"
        tail = ";" if volcano == "1.7" else ""
        assert await create(api, pod("a", {group: "missing"})) == (
            f"{DENIED}failed to get PodGroup for pod <{NS}/a>: "
            'podgroups.scheduling.volcano.sh "missing" not found'
        )
        assert await create(api, pod("b", {group: "ready"})) == ""
        assert await create(api, pod("c", {group: "noqueue"})) == ""
        assert await create(api, pod("d", {group: "closed"})) == (
            f"{DENIED}failed :  can only submit job to queue with state `Open`, "
            f"queue `shut` status is `Closed`;{tail}"
        )
        assert await create(api, pod("e", {group: "lost"})) == (
            f"{DENIED}failed :  unable to find job queue: "
            f'queues.scheduling.volcano.sh "nowhere" not found;{tail}'
        )
        # Without a group: the queue annotation, then the budget annotations.
        queue = "scheduling.volcano.sh/queue-name"
        assert await create(api, pod("f", {queue: "shut"})) == (
            f"{DENIED}can only submit job to queue with state `Open`, "
            "queue `shut` status is `Closed`;"
        )
        assert await create(api, pod("g", {queue: "default"})) == ""
        jdb = "scheduling.volcano.sh/jdb-min-available"
        assert await create(api, pod("h", {jdb: "0"})) == (
            f'{DENIED}invalid value <"0"> for {jdb}, it must be a positive integer'
        )
        assert await create(api, pod("i", {jdb: "100%"})) == (
            f'{DENIED}invalid value <"100%"> for {jdb}, it must be a valid percentage '
            "which between 1% ~ 99%"
        )
        both = {jdb: "1", "scheduling.volcano.sh/jdb-max-unavailable": "50%"}
        assert await create(api, pod("j", both)) == (
            f"{DENIED}not allow configure multiple annotations <[{jdb} "
            "scheduling.volcano.sh/jdb-max-unavailable]> at same time"
        )
        # Not Volcano's pods, nor its own namespace's: never asked.
        assert await create(api, pod("k", {group: "missing"}, scheduler="default-scheduler")) == ""
        assert await create(api, pod("l", {group: "missing"}), "volcano-system") == ""
        assert [d[1] for d in api.volcano_admission.denied] == list("adefhij")


async def test_1_12_has_no_pod_admission() -> None:
    async with ApiServer(versions=Versions.of(kube="1.33", volcano="1.12")) as api:
        cluster(api)
        assert api.volcano_admission is None
        assert await create(api, pod("a", {"scheduling.k8s.io/group-name": "missing"})) == ""
