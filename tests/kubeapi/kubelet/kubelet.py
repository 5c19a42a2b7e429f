"""The kubelets of a cluster without real nodes, as the recordings' test loop played them.

One :meth:`Kubelet.step` is one tick of that loop: a bound pod in phase Pending is marked
Running through the status subresource with a strategic merge patch (startTime, hostIP,
podIP, conditions Initialized/Ready/ContainersReady/PodScheduled True, a running status per
container); a pod being deleted is deleted again with grace period 0, which ends its grace
period. With ``fail_terminating`` the kubelet first sets a terminating pod's phase to
Failed (its containers terminated with exit code 143, Ready False, the DisruptionTarget
condition kept) and deletes it on the next tick, as a real kubelet does: a Job controller
with a podFailurePolicy waits for that phase before it counts or replaces the pod.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tests.kubeapi.resources import now_iso
from tests.kubeapi.status import ApiStatusError
from tests.kubeapi.store import ApiStore

Json = dict[str, Any]

__all__ = ["Kubelet", "finish_pod"]

_SMP = "application/strategic-merge-patch+json"
_TERMINAL = ("Succeeded", "Failed")
_ORDER = ("Initialized", "Ready", "ContainersReady", "PodScheduled")


def _condition(kind: str, status: str, reason: str | None = None) -> Json:
    c: Json = {
        "type": kind,
        "status": status,
        "lastProbeTime": None,
        "lastTransitionTime": now_iso(),
    }
    if reason:
        c["reason"] = reason
    return c


def _order(pod: Json, first: Iterable[str]) -> list[Json]:
    """The $setElementOrder of a conditions patch: the kubelet's own conditions first, then
    the others the pod already has (DisruptionTarget...)."""
    names = list(first)
    for c in (pod.get("status") or {}).get("conditions") or ():
        if c.get("type") not in names:
            names.append(c["type"])
    return [{"type": n} for n in names]


class Kubelet:
    """The kubelet of every node (or of ``nodes``). ``hold`` names pods (namespace/name) it
    leaves alone for now, as the recordings' loop was held back."""

    def __init__(
        self,
        *,
        nodes: Iterable[str] | None = None,
        fail_terminating: bool = False,
        host_ip: str = "127.0.0.1",
        pod_ip: str = "10.244.0.10",
    ) -> None:
        self.nodes = frozenset(nodes) if nodes is not None else None
        self.fail_terminating = fail_terminating
        self.host_ip = host_ip
        self.pod_ip = pod_ip
        self.hold: set[str] = set()

    def __call__(self, store: ApiStore) -> int:
        return self.step(store)

    def _mine(self, pod: Json) -> bool:
        node = (pod.get("spec") or {}).get("nodeName")
        meta = pod["metadata"]
        return (
            bool(node)
            and (self.nodes is None or node in self.nodes)
            and f"{meta.get('namespace')}/{meta['name']}" not in self.hold
        )

    def step(self, store: ApiStore) -> int:
        """One tick over every pod; how many writes it made."""
        pods = store.resource("pods")
        writes = 0
        for pod in list(store.items(pods)):
            if not self._mine(pod):
                continue
            meta = pod["metadata"]
            ns, name = meta.get("namespace", ""), meta["name"]
            phase = (pod.get("status") or {}).get("phase")
            try:
                if meta.get("deletionTimestamp"):
                    if self.fail_terminating and phase not in _TERMINAL:
                        store.patch(pods, ns, name, _SMP, self._failed(pod), subresource="status")
                    elif meta.get("deletionGracePeriodSeconds") or phase in _TERMINAL:
                        store.delete(pods, ns, name, grace_period_seconds=0)
                    else:
                        continue  # grace 0 already; a finalizer holds it
                    writes += 1
                elif phase == "Pending":
                    store.patch(pods, ns, name, _SMP, self._running(pod), subresource="status")
                    writes += 1
            except ApiStatusError as e:
                if e.code != 404:  # gone meanwhile: nothing to do
                    raise
        return writes

    def _running(self, pod: Json) -> Json:
        now = now_iso()
        containers = (pod.get("spec") or {}).get("containers") or ()
        return {
            "status": {
                "$setElementOrder/conditions": _order(pod, _ORDER),
                "phase": "Running",
                "startTime": now,
                "hostIP": self.host_ip,
                "podIP": self.pod_ip,
                "podIPs": [{"ip": self.pod_ip}],
                "conditions": [_condition(k, "True") for k in _ORDER],
                "containerStatuses": [
                    {
                        "name": c["name"],
                        "state": {"running": {"startedAt": now}},
                        "lastState": {},
                        "ready": True,
                        "restartCount": 0,
                        "image": c.get("image", ""),
                        "imageID": "",
                        "started": True,
                    }
                    for c in containers
                ],
            }
        }

    def _failed(self, pod: Json) -> Json:
        return _terminated(pod, "Failed", 143, "Error")


def _terminated(pod: Json, phase: str, exit_code: int, reason: str) -> Json:
    now = now_iso()
    status = pod.get("status") or {}
    started = {
        s.get("name"): ((s.get("state") or {}).get("running") or {}).get("startedAt", now)
        for s in status.get("containerStatuses") or ()
    }
    not_ready = "PodFailed" if phase == "Failed" else "PodCompleted"
    return {
        "status": {
            "$setElementOrder/conditions": _order(pod, _ORDER),
            "phase": phase,
            "conditions": [
                _condition("Ready", "False", not_ready),
                _condition("ContainersReady", "False", not_ready),
            ],
            "containerStatuses": [
                {
                    "name": c["name"],
                    "state": {
                        "terminated": {
                            "exitCode": exit_code,
                            "reason": reason,
                            "startedAt": started.get(c["name"], now),
                            "finishedAt": now,
                        }
                    },
                    "lastState": {},
                    "ready": False,
                    "restartCount": 0,
                    "image": c.get("image", ""),
                    "imageID": "",
                    "started": False,
                }
                for c in (pod.get("spec") or {}).get("containers") or ()
            ],
        }
    }


def finish_pod(store: ApiStore, namespace: str, name: str, *, exit_code: int = 0) -> Json:
    """A running pod's containers end with ``exit_code``: phase Succeeded (0) or Failed, as
    its kubelet reports it."""
    pods = store.resource("pods")
    pod = store.get(pods, namespace, name)
    phase, reason = ("Succeeded", "Completed") if exit_code == 0 else ("Failed", "Error")
    return store.patch(
        pods,
        namespace,
        name,
        _SMP,
        _terminated(pod, phase, exit_code, reason),
        subresource="status",
    )
