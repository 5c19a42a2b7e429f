"""The PodGroup of a gang whose pods come without one, read from the live workload.

The webhook makes a gang's PodGroup when its workload is created, or resumed (an
UPDATE). With ``failurePolicy: Ignore`` an UPDATE may never reach it, and a restarted
webhook remembers nothing: so a pod of a gang whose PodGroup is not known to exist
makes the reconciler read the pod's workload (up to its top-level owner: a JobSet's
Job names the JobSet) and ask :func:`webhook.admission.entry.admit` -- pure, on the workload as
it is -- what its PodGroup is. A workload that is suspended gets none (a suspended
workload has no PodGroup; docs/safe-moves.md).
Only a gang corral named (``corral.dev/gang`` on the workload, or the name corral
derives from it) is made: a workload whose templates name a gang of someone else's
keeps waiting for theirs.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal

from webhook.admission import keys as K
from webhook.admission.cluster_fit import ClusterCapacity
from webhook.admission.entry import admit
from webhook.admission.native_gangs import Served
from webhook.admission.validate import derived_name
from webhook.config import WebhookConfig
from webhook.podgroup_intent import OwnerHint, OwnerRef, PodGroupIntent

__all__ = ["OwnerPodGroups", "ReadFn"]

# read(namespace, owner): the owner's object, or None when it is gone or of a kind the
# webhook does not read.
ReadFn = Callable[[str, OwnerRef], Awaitable[Mapping[str, Any] | None]]

# How many owners up a pod's gang may be made (pod -> Job -> JobSet).
_DEPTH = 3


class OwnerPodGroups:
    """``ensure`` for :class:`~webhook.podgroups.reconciler.PodGroupReconciler`."""

    def __init__(self, read: ReadFn, config: WebhookConfig, served: Served | None = None) -> None:
        self._read = read
        self._config = config
        self._served = served  # what the API server serves (the native gang API's version)

    async def __call__(self, hint: OwnerHint) -> PodGroupIntent | Literal[False] | None:
        """The intent; None while there is none to make (the workload is gone,
        suspended, being deleted); False when there never is (not a gang corral named)."""
        owner: OwnerRef | None = hint.owner
        obj: Mapping[str, Any] | None = None
        for _ in range(_DEPTH):
            if owner is None:
                break
            got = await self._read(hint.namespace, owner)
            if got is None:
                return None
            obj = got
            owner = _workload_controller(got, self._config)
        if obj is None:
            return None
        intents = self.intents(hint.namespace, obj)
        if hint.name not in _corrals_names(obj, len(intents)):
            return False
        for intent in intents:
            if intent.key == hint.key:
                return intent
        return None

    def intents(self, namespace: str, obj: Mapping[str, Any]) -> tuple[PodGroupIntent, ...]:
        """The PodGroups ``obj`` (a stored workload) has, as admission of an UPDATE that
        changed its gang would ask for them (none while it is suspended)."""
        api = str(obj.get("apiVersion") or "")
        group, _, version = api.rpartition("/")
        review = {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": str(uuid.uuid4()),
                "kind": {"group": group, "version": version, "kind": str(obj.get("kind"))},
                "namespace": namespace,
                "operation": "UPDATE",
                "object": dict(obj),
                "oldObject": None,
            },
        }
        result = admit(review, _NO_CLUSTER, self._config, self._served)
        return result.intents


_NO_CLUSTER: ClusterCapacity | None = None


def _corrals_names(obj: Mapping[str, Any], instances: int) -> set[str]:
    """The gang names corral gives ``obj`` at admission (and its instances' names)."""
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    name = str(meta.get("name") or "")
    bases = {derived_name(str(obj.get("kind") or ""), name), name}
    given = K.user_values(meta).get(K.GANG)
    if given:
        bases.add(given)
    out = set(bases)
    for b in bases:
        out.update(derived_name(b, str(i)) for i in range(instances))
    return out


def _workload_controller(obj: Mapping[str, Any], config: WebhookConfig) -> OwnerRef | None:
    """The controller of ``obj`` when it is a workload kind of the table (its gang)."""
    meta = obj.get("metadata")
    refs = meta.get("ownerReferences") if isinstance(meta, Mapping) else None
    for r in refs if isinstance(refs, list) else ():
        if isinstance(r, Mapping) and r.get("controller") is True:
            api, kind = str(r.get("apiVersion") or ""), str(r.get("kind") or "")
            if config.table.owns(api, kind):
                return OwnerRef(api, kind, str(r.get("name") or ""), str(r.get("uid") or ""))
    return None
