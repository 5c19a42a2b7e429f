"""PodDisruptionBudgets in the in-memory API server: the disruption controller's status
figures, and the eviction subresource with its budget rules (DisruptionTarget, dry run).

Follows ``pkg/registry/core/pod/storage/eviction.go`` (v1.28-v1.37): a Pending, finished
or terminating pod is evicted whatever its budget says, and every evicted pod gets the
DisruptionTarget condition first; a pod under more than one budget gets a 500 with no
reason. And ``pkg/controller/disruption/disruption.go``: a budget with maxUnavailable
or a string minAvailable over pods whose controller has no scale (Job pods, bare pods)
cannot be computed, and the controller fails safe (disruptionsAllowed 0, SyncFailed).

:class:`DisruptionBudgets` is a part of :class:`~tests.kubeapi.store.ApiStore`: the
store calls ``_sync_pdbs`` after every write of a pod or a budget.
"""

from __future__ import annotations

import math
from typing import Any

from gangplace.engine.selectors import LabelSelector

from tests.kubeapi.resources import TERMINAL_PHASES, ResourceType, copy_json, now_iso
from tests.kubeapi.status import ApiStatusError, status_body

Json = dict[str, Any]
Key = tuple[str, str]

__all__ = ["DisruptionBudgets"]

# Owners the disruption controller finds a scale for (pkg/controller/disruption/
# disruption.go, the finders of getExpectedScale: ReplicationController, ReplicaSet with its
# Deployment, StatefulSet, and the generic scale subresource, which these built-in kinds
# have). A Job has none; custom resources are taken to have none.
_SCALABLE = frozenset({"ReplicaSet", "ReplicationController", "StatefulSet", "Deployment"})


def _needs_scale(spec: Json) -> bool:
    """maxUnavailable, or a minAvailable given as a string (a percentage), is computed
    against the owners' scale; an integer minAvailable against the pods alone."""
    return spec.get("maxUnavailable") is not None or isinstance(spec.get("minAvailable"), str)


def _scale_error(pods: list[Json]) -> str | None:
    """Why getExpectedScale fails for these pods (the first pod without a controller, or
    whose controller has no scale), as the controller words it; None when it does not."""
    for p in pods:
        meta = p.get("metadata") or {}
        ref = next((r for r in meta.get("ownerReferences") or () if r.get("controller")), None)
        if ref is None:
            return f'found no controller ref for pod "{meta.get("name")}"'
        if ref.get("kind") not in _SCALABLE:
            return f'found no controllers for pod "{meta.get("name")}"'
    return None


def _scaled(value: int | str, total: int) -> int:
    """An IntOrString against a total, percentages rounded up (the disruption controller's
    rounding for both minAvailable and maxUnavailable)."""
    if isinstance(value, int):
        return value
    if value.endswith("%"):
        return math.ceil(int(value[:-1]) * total / 100)
    return int(value)


def _pod_healthy(pod: Json) -> bool:
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    status = pod.get("status") or {}
    if status.get("phase") != "Running":
        return False
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or ()
    )


class DisruptionBudgets:
    """Budgets and eviction (a part of :class:`~tests.kubeapi.store.ApiStore`). It
    remembers the pods evicted under a budget, and those gone and not yet replaced."""

    types: dict[tuple[str, str, str], ResourceType]
    _evicted: set[str]
    _unreplaced: dict[Key, dict[str, str]]

    def _pdb_status(self, pdb: Json, pods: list[Json] | None) -> Json:
        """The disruption controller's figures. Every matching pod not finished is
        expected; one being deleted is not healthy. An evicted pod stays in
        ``status.disruptedPods`` until it is seen terminating. A pod with a controlling
        owner that was evicted and is gone still counts as expected until a new pod under
        the budget replaces it (the fake has no workload scale to read, so it remembers)."""
        meta = pdb["metadata"]
        ns = meta.get("namespace", "")
        spec = pdb.get("spec") or {}
        selector = LabelSelector.from_json(spec.get("selector"))
        if pods is None:
            pods = list(self.items(self.types[("", "v1", "pods")], ns))
        selected = [p for p in pods if selector.matches((p.get("metadata") or {}).get("labels"))]
        matching = [
            p for p in selected if (p.get("status") or {}).get("phase") not in TERMINAL_PHASES
        ]
        old = pdb.get("status") or {}
        if _needs_scale(spec):
            error = _scale_error(selected)
            if error is not None:
                return self._fail_safe(old, error)
        by_name = {p["metadata"]["name"]: p for p in matching}
        disrupted: dict[str, str] = {
            n: t
            for n, t in (old.get("disruptedPods") or {}).items()
            if n in by_name and not by_name[n]["metadata"].get("deletionTimestamp")
        }
        unreplaced = self._unreplaced.get((ns, meta["name"]), {})
        expected = len(matching) + len(unreplaced)
        healthy = sum(
            1 for p in matching if _pod_healthy(p) and p["metadata"]["name"] not in disrupted
        )
        if spec.get("maxUnavailable") is not None:
            desired = max(0, expected - _scaled(spec["maxUnavailable"], expected))
        elif spec.get("minAvailable") is not None:
            desired = _scaled(spec["minAvailable"], expected)
        else:
            desired = 0
        allowed = max(0, healthy - desired)
        cond_status = "True" if allowed > 0 else "False"
        old_cond = next(
            (c for c in old.get("conditions") or () if c.get("type") == "DisruptionAllowed"), {}
        )
        status: Json = {
            "observedGeneration": meta.get("generation", 1),
            "disruptionsAllowed": allowed,
            "currentHealthy": healthy,
            "desiredHealthy": desired,
            "expectedPods": expected,
            "conditions": [
                {
                    "type": "DisruptionAllowed",
                    "status": cond_status,
                    "reason": "SufficientPods" if allowed > 0 else "InsufficientPods",
                    "message": "",
                    "observedGeneration": meta.get("generation", 1),
                    "lastTransitionTime": old_cond.get("lastTransitionTime")
                    if old_cond.get("status") == cond_status
                    else now_iso(),
                }
            ],
        }
        if disrupted:
            status["disruptedPods"] = disrupted
        return status

    @staticmethod
    def _fail_safe(old: Json, error: str) -> Json:
        """``failSafe``: the figures kept, disruptionsAllowed 0, DisruptionAllowed False
        with reason SyncFailed; observedGeneration not advanced, so a new budget stays
        "still being processed" for the eviction subresource."""
        status: Json = {
            "disruptionsAllowed": 0,
            "currentHealthy": old.get("currentHealthy", 0),
            "desiredHealthy": old.get("desiredHealthy", 0),
            "expectedPods": old.get("expectedPods", 0),
        }
        if "observedGeneration" in old:
            status["observedGeneration"] = old["observedGeneration"]
        old_cond = next(
            (c for c in old.get("conditions") or () if c.get("type") == "DisruptionAllowed"), {}
        )
        status["conditions"] = [
            {
                "type": "DisruptionAllowed",
                "status": "False",
                "reason": "SyncFailed",
                "message": error,
                "observedGeneration": old.get("observedGeneration", 0),
                "lastTransitionTime": old_cond.get("lastTransitionTime")
                if old_cond.get("status") == "False"
                else now_iso(),
            }
        ]
        if old.get("disruptedPods"):
            status["disruptedPods"] = old["disruptedPods"]
        return status

    def _sync_pdbs(
        self,
        namespace: str,
        only: str | None = None,
        new_pod: Json | None = None,
        gone_pod: Json | None = None,
    ) -> None:
        pdb_type = self.types[("policy", "v1", "poddisruptionbudgets")]
        pdbs = [p for p in self.items(pdb_type, namespace) if only in (None, p["metadata"]["name"])]
        if not pdbs:
            return
        pods = list(self.items(self.types[("", "v1", "pods")], namespace))
        for pdb in pdbs:
            key = (namespace, pdb["metadata"]["name"])
            selector = LabelSelector.from_json((pdb.get("spec") or {}).get("selector"))
            unreplaced = self._unreplaced.setdefault(key, {})
            if (
                new_pod is not None
                and unreplaced
                and selector.matches(new_pod["metadata"].get("labels"))
            ):
                # A new pod under the budget replaces the oldest evicted one.
                oldest = min(unreplaced, key=lambda n: (unreplaced[n], n))
                del unreplaced[oldest]
            if gone_pod is not None:
                gmeta = gone_pod["metadata"]
                owned = any(r.get("controller") for r in gmeta.get("ownerReferences") or ())
                if (
                    owned
                    and f"{namespace}/{gmeta['name']}" in self._evicted
                    and selector.matches(gmeta.get("labels"))
                ):
                    unreplaced[gmeta["name"]] = now_iso()
            if not unreplaced:
                self._unreplaced.pop(key, None)
            status = self._pdb_status(pdb, pods)
            if status != pdb.get("status"):
                new = dict(pdb)
                new["metadata"] = dict(pdb["metadata"])
                new["status"] = status
                self._commit(pdb_type, "MODIFIED", new, pdb)

    def _mark_disrupted(self, pdb: Json, pod_name: str) -> None:
        """Record an evicted pod in the budget's status, as the eviction handler does."""
        pdb_type = self.types[("policy", "v1", "poddisruptionbudgets")]
        status = dict(pdb.get("status") or {})
        status["disruptedPods"] = {**(status.get("disruptedPods") or {}), pod_name: now_iso()}
        status["disruptionsAllowed"] = max(0, status.get("disruptionsAllowed", 0) - 1)
        new = {**pdb, "metadata": dict(pdb["metadata"]), "status": status}
        self._commit(pdb_type, "MODIFIED", new, pdb)

    def evict(self, namespace: str, name: str, body: Any, *, dry_run: bool = False) -> Json:
        """POST pods/{name}/eviction, with the API server's disruption-budget rules."""
        pods = self.types[("", "v1", "pods")]
        if not isinstance(body, dict) or body.get("kind") != "Eviction":
            raise ApiStatusError(400, "BadRequest", "the body must be an Eviction object")
        self._check_namespace(pods, namespace)
        if (body.get("metadata") or {}).get("name") != name:
            raise ApiStatusError(
                400, "BadRequest", "name in URL does not match name in Eviction object"
            )
        pod = self.get(pods, namespace, name)
        options = body.get("deleteOptions") or {}
        if options.get("dryRun"):
            if options["dryRun"] != ["All"]:
                raise ApiStatusError(
                    400, "BadRequest", f"Invalid dryRun value {options['dryRun']!r}: only All"
                )
            dry_run = True
        grace = options.get("gracePeriodSeconds")
        pre = (options.get("preconditions")) or {}
        uid, rv = pre.get("uid"), pre.get("resourceVersion")
        if uid and uid != pod["metadata"].get("uid"):
            raise ApiStatusError(
                409,
                "Conflict",
                f"Precondition failed: UID in precondition: {uid}, UID in object meta: "
                f"{pod['metadata'].get('uid')}",
            )
        if rv and rv != pod["metadata"].get("resourceVersion"):
            raise ApiStatusError(
                409,
                "Conflict",
                f"Precondition failed: ResourceVersion in precondition: {rv}, "
                f"ResourceVersion in object meta: {pod['metadata'].get('resourceVersion')}",
            )
        phase = (pod.get("status") or {}).get("phase")
        exempt = bool(pod["metadata"].get("deletionTimestamp")) or phase in (
            "Pending",
            *TERMINAL_PHASES,
        )
        if not exempt:
            pdb_type = self.types[("policy", "v1", "poddisruptionbudgets")]
            labels = pod["metadata"].get("labels")
            matching = [
                p
                for p in self.items(pdb_type, namespace)
                if LabelSelector.from_json((p.get("spec") or {}).get("selector")).matches(labels)
            ]
            if len(matching) > 1:
                # a bare Status: code 500 and no reason (eviction.go)
                raise ApiStatusError(
                    500,
                    "",
                    "This pod has more than one PodDisruptionBudget, which the eviction "
                    "subresource does not support.",
                )
            if matching:
                self._check_budget(matching[0], pod)
                if not dry_run:
                    self._mark_disrupted(matching[0], name)
                    self._evicted.add(f"{namespace}/{name}")
        if not dry_run:
            # Also on a Pending, finished or already terminating pod (canIgnorePDB, then
            # addConditionAndDeletePod), where PodDisruptionConditions is on (1.26+).
            self._disruption_target(pods, pod)
            self.delete(
                pods,
                namespace,
                name,
                uid=uid,
                grace_period_seconds=grace if isinstance(grace, int) else None,
            )
        return status_body(201, "", "", success=True)

    def _disruption_target(self, pods: ResourceType, pod: Json) -> None:
        """The condition the eviction handler sets before it deletes the pod
        (``podutil.UpdatePodCondition``: a condition already True is kept as it is, and
        an unchanged pod is not written)."""
        conditions = list((pod.get("status") or {}).get("conditions") or ())
        if any(
            c.get("type") == "DisruptionTarget" and c.get("status") == "True" for c in conditions
        ):
            return
        new = copy_json(pod)
        kept = [c for c in conditions if c.get("type") != "DisruptionTarget"]
        kept.append(
            {
                "type": "DisruptionTarget",
                "status": "True",
                "lastProbeTime": None,
                "lastTransitionTime": now_iso(),
                "reason": "EvictionByEvictionAPI",
                "message": "Eviction API: evicting",
            }
        )
        new.setdefault("status", {})["conditions"] = kept
        self._commit(pods, "MODIFIED", new, pod)
        self._after_write(pods, new)

    def _check_budget(self, pdb: Json, pod: Json) -> None:
        status = pdb.get("status") or {}
        name = pdb["metadata"]["name"]

        def refuse(cause: str) -> ApiStatusError:
            return ApiStatusError(
                429,
                "TooManyRequests",
                "Cannot evict pod as it would violate the pod's disruption budget.",
                {"causes": [{"reason": "DisruptionBudget", "message": cause}]},
            )

        if status.get("observedGeneration", 0) < pdb["metadata"].get("generation", 1):
            raise refuse(f"The disruption budget {name} is still being processed by the server.")
        current, desired = status.get("currentHealthy", 0), status.get("desiredHealthy", 0)
        if not _pod_healthy(pod):
            policy = (pdb.get("spec") or {}).get("unhealthyPodEvictionPolicy") or "IfHealthyBudget"
            if policy == "AlwaysAllow" or current >= desired:
                return
            raise refuse(
                f"The disruption budget {name} does not have enough healthy pods to allow "
                f"evicting an unhealthy pod ({current} healthy, {desired} needed)"
            )
        if status.get("disruptionsAllowed", 0) <= 0:
            raise refuse(
                f"The disruption budget {name} needs {desired} healthy pods and has {current} "
                "currently"
            )
