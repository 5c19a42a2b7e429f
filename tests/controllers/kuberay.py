"""A model of KubeRay's RayJob and RayCluster controllers, read from ray-project/kuberay
at v1.1.0 (``ray-operator/controllers/ray/rayjob_controller.go``: ``Reconcile``,
``validateRayJobSpec``, ``updateStatusToSuspendingIfNeeded``,
``deleteClusterResources``), checked against v1.2.0-v1.4.0 (the same transitions; from
v1.3 an invalid spec also gets a Warning Event ``InvalidRayJobSpec``).

- ``status.jobDeploymentStatus``: New -> Initializing (the RayCluster
  ``<rayjob>-raycluster`` made from ``spec.rayClusterSpec``, unless ``clusterSelector``
  names an existing one in ``ray.io/cluster``) -> Running once that cluster is ready.
  The submitter Job and the Ray job itself are not modelled.
- ``spec.suspend`` is valid only with ``shutdownAfterJobFinishes: true`` and no
  ``clusterSelector``; otherwise the RayJob is not reconciled at all (a Warning Event,
  from v1.3) and everything it has runs on. From Running or Initializing it goes
  Suspending: the RayCluster it made is deleted (its pods go with it, by the garbage
  collector), then Suspended. Unsuspended: New again, a new cluster.
- The RayCluster controller makes one head pod and each worker group's ``replicas``
  pods (``<cluster>-head``, ``<cluster>-<group>-worker-<i>``), owned by the RayCluster,
  labelled ``ray.io/cluster``; ``status.state`` ``ready`` once they all run.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from datetime import datetime

from tests.controllers.common import controller_uid, owner_ref, status_patch
from tests.controllers.events import EventRecorder
from tests.controllers.rest import Json, Rest, RestError
from tests.controllers.runner import wall_clock

__all__ = ["RAY", "KubeRay"]

RAY = "ray.io/v1"
_CLUSTER_LABEL = "ray.io/cluster"


def invalid_suspend(job: Json) -> str:
    """validateRayJobSpec's suspend rules (v1.1.0)."""
    spec = job.get("spec") or {}
    if not spec.get("suspend"):
        return ""
    if not spec.get("shutdownAfterJobFinishes"):
        return "a RayJob with shutdownAfterJobFinishes set to false is not allowed to be suspended"
    if spec.get("clusterSelector"):
        return "the ClusterSelector mode doesn't support the suspend operation"
    return ""


class KubeRay:
    name = "kuberay-operator"

    def __init__(
        self, rest: Rest, *, version: str = "1.1", clock: Callable[[], datetime] = wall_clock
    ) -> None:
        self.rest = rest
        self.version = version
        self.events = EventRecorder(rest, "rayjob-controller", clock)
        self._warned: set[tuple[str, str]] = set()  # (uid, why): one Event each here

    async def close(self) -> None:
        await self.rest.close()

    async def step(self) -> bool:
        changed = False
        for job in await self.rest.list(RAY, "rayjobs"):
            changed |= await self._rayjob(job)
        pods = await self.rest.list("v1", "pods")
        for cluster in await self.rest.list(RAY, "rayclusters"):
            if not cluster["metadata"].get("deletionTimestamp"):
                mine = [p for p in pods if controller_uid(p) == cluster["metadata"]["uid"]]
                changed |= await self._raycluster(cluster, mine)
        return changed

    # --- RayJob -----------------------------------------------------------------------

    async def _rayjob(self, job: Json) -> bool:
        meta, spec = job["metadata"], job.get("spec") or {}
        ns = meta["namespace"]
        why = invalid_suspend(job)
        if why:
            if self.version >= "1.3" and (meta["uid"], why) not in self._warned:
                self._warned.add((meta["uid"], why))
                await self.events.record(
                    job,
                    "Warning",
                    "InvalidRayJobSpec",
                    f"The RayJob spec is invalid {ns}/{meta['name']}: {why}",
                )
            return False
        old: Json = copy.deepcopy(job.get("status") or {})
        status: Json = copy.deepcopy(old)
        phase = status.get("jobDeploymentStatus") or "New"
        selector = spec.get("clusterSelector") or {}
        cluster_name = selector.get(_CLUSTER_LABEL) or f"{meta['name']}-raycluster"
        cluster = await self.rest.get(RAY, "rayclusters", ns, cluster_name)
        if phase == "New":
            status.update(jobDeploymentStatus="Initializing", rayClusterName=cluster_name)
        elif phase in ("Initializing", "Running") and spec.get("suspend"):
            status["jobDeploymentStatus"] = "Suspending"
        elif phase == "Initializing":
            if cluster is None and not selector:
                body = {
                    "apiVersion": RAY,
                    "kind": "RayCluster",
                    "metadata": {
                        "name": cluster_name,
                        "namespace": ns,
                        "ownerReferences": [
                            owner_ref({**job, "apiVersion": RAY, "kind": "RayJob"})
                        ],
                    },
                    "spec": copy.deepcopy(spec.get("rayClusterSpec") or {}),
                }
                await self.rest.create(RAY, "rayclusters", ns, body)
                return True
            if cluster is not None and (cluster.get("status") or {}).get("state") == "ready":
                status["jobDeploymentStatus"] = "Running"
        elif phase == "Suspending":
            if cluster is not None:
                if not cluster["metadata"].get("deletionTimestamp"):
                    await self.rest.delete(RAY, "rayclusters", ns, cluster_name)
                    await self.events.record(
                        job, "Normal", "Deleted", f"Deleted cluster {cluster_name}"
                    )
                    return True
                return False  # wait until it is gone
            status.update(jobDeploymentStatus="Suspended", rayClusterName="", jobStatus="")
        elif phase == "Suspended" and not spec.get("suspend"):
            status.update(jobDeploymentStatus="New", jobStatus="")
        patch = status_patch(old, status)
        if not patch:
            return False
        try:
            await self.rest.patch(
                RAY, "rayjobs", ns, meta["name"], {"status": patch}, subresource="status"
            )
        except RestError as e:
            if e.status not in (404, 409):
                raise
        return True

    # --- RayCluster -------------------------------------------------------------------

    async def _raycluster(self, cluster: Json, pods: list[Json]) -> bool:
        meta, spec = cluster["metadata"], cluster.get("spec") or {}
        ns, name = meta["namespace"], meta["name"]
        want: dict[str, Json] = {
            f"{name}-head": (spec.get("headGroupSpec") or {}).get("template") or {}
        }
        for group in spec.get("workerGroupSpecs") or ():
            for i in range(int(group.get("replicas", 1))):
                want[f"{name}-{group['groupName']}-worker-{i}"] = group.get("template") or {}
        have = {p["metadata"]["name"] for p in pods}
        changed = False
        for pod_name, tmpl in sorted(want.items()):
            if pod_name in have:
                continue
            t = copy.deepcopy(tmpl)
            tmeta = t.get("metadata") or {}
            body = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": pod_name,
                    "namespace": ns,
                    "labels": {**(tmeta.get("labels") or {}), _CLUSTER_LABEL: name},
                    "annotations": dict(tmeta.get("annotations") or {}),
                    "ownerReferences": [
                        owner_ref({**cluster, "apiVersion": RAY, "kind": "RayCluster"})
                    ],
                },
                "spec": t.get("spec") or {},
            }
            await self.rest.create("v1", "pods", ns, body)
            changed = True
        ready = len(pods) == len(want) and all(
            (p.get("status") or {}).get("phase") == "Running" for p in pods
        )
        state = "ready" if ready else ""
        if (cluster.get("status") or {}).get("state", "") != state:
            await self.rest.patch(
                RAY,
                "rayclusters",
                ns,
                name,
                {"status": {"state": state or None}},
                subresource="status",
            )
            changed = True
        return changed
