"""Deletion in the in-memory API server: preconditions, the grace period of a pod on a
node, finalizers (and the garbage collector's, for Foreground and Orphan), a namespace's
contents, and what a DELETE answers.

:class:`Deletion` is a part of :class:`~tests.kubeapi.store.ApiStore`: it writes through
the store's commit and runs its controllers after each write.
"""

from __future__ import annotations

from typing import Any

from tests.kubeapi.resources import TERMINAL_PHASES, ResourceType, copy_json, now_iso
from tests.kubeapi.status import ApiStatusError, status_body

Json = dict[str, Any]

__all__ = ["Deletion"]


class Deletion:
    """Deleting from the store (a part of :class:`~tests.kubeapi.store.ApiStore`)."""

    types: dict[tuple[str, str, str], ResourceType]

    @staticmethod
    def _finished(obj: Json) -> bool:
        """Being deleted, no finalizer left and no grace period still running."""
        meta = obj["metadata"]
        return (
            bool(meta.get("deletionTimestamp"))
            and not meta.get("finalizers")
            and not meta.get("deletionGracePeriodSeconds")
        )

    def delete(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        *,
        uid: str | None = None,
        resource_version: str | None = None,
        dry_run: bool = False,
        grace_period_seconds: int | None = None,
        propagation_policy: str | None = None,
    ) -> Json:
        """DELETE, as the API server does it: a bound, running pod is deleted gracefully
        (deletionTimestamp and deletionGracePeriodSeconds set; gone when deleted again with
        grace 0, e.g. by its kubelet); an object with finalizers stays, with its
        deletionTimestamp, until they are removed; ``Foreground`` and ``Orphan`` add their
        finalizer for the garbage collector. Anything else goes at once."""
        old = self.get(rt, namespace, name)
        meta = old["metadata"]
        if uid and uid != meta.get("uid"):
            raise ApiStatusError(
                409,
                "Conflict",
                f"Precondition failed: UID in precondition: {uid}, UID in object meta: "
                f"{meta.get('uid')}",
            )
        if resource_version and resource_version != meta.get("resourceVersion"):
            raise ApiStatusError(
                409,
                "Conflict",
                f"Precondition failed: ResourceVersion in precondition: {resource_version}, "
                f"ResourceVersion in object meta: {meta.get('resourceVersion')}",
            )
        if grace_period_seconds is not None and grace_period_seconds < 0:
            grace_period_seconds = 0
        if propagation_policy not in (None, "Background", "Foreground", "Orphan"):
            raise ApiStatusError(
                400,
                "BadRequest",
                f"propagationPolicy: Unsupported value: {propagation_policy!r}: supported "
                'values: "Foreground", "Background", "Orphan"',
            )
        grace = self._grace(rt, old, grace_period_seconds)
        finalizers = list(meta.get("finalizers") or ())
        gc = {"Foreground": "foregroundDeletion", "Orphan": "orphan"}.get(propagation_policy or "")
        if gc and gc not in finalizers and not meta.get("deletionTimestamp"):
            finalizers.append(gc)
        if not grace and not finalizers and not meta.get("deletionTimestamp"):
            if dry_run:
                return old
            return self._remove(rt, old)
        # Graceful: mark it (or shorten a running grace period) and keep it.
        new = copy_json(old)
        nmeta = new["metadata"]
        current = nmeta.get("deletionGracePeriodSeconds")
        if not nmeta.get("deletionTimestamp") or (current is not None and grace < current):
            if not nmeta.get("deletionTimestamp") and "generation" in nmeta:
                nmeta["generation"] += 1  # the deletion is a change the object's owner sees
            nmeta["deletionTimestamp"] = now_iso(grace)
            nmeta["deletionGracePeriodSeconds"] = grace
        if finalizers:
            nmeta["finalizers"] = finalizers
        if dry_run:
            return new
        if new != old:
            self._commit(rt, "MODIFIED", new, old)
        if self._finished(new):
            return self._remove(rt, new)
        self._after_write(rt, new)
        return self.find(rt, namespace, name) or new

    def delete_answer(self, rt: ResourceType, deleted: Json, *, dry_run: bool = False) -> Json:
        """What a DELETE answers: the object while it is still there (being deleted), and
        once it is gone a Status naming it -- except for pods, whose registry answers with
        the deleted object."""
        meta = deleted["metadata"]
        if dry_run:
            gone = not meta.get("deletionTimestamp")
        else:
            gone = self.find(rt, meta.get("namespace", ""), meta["name"]) is None
        if not gone or (rt.group, rt.plural) == ("", "pods"):
            return deleted
        body = status_body(
            200,
            "",
            "",
            {"name": meta["name"], "group": rt.group, "kind": rt.plural, "uid": meta.get("uid")},
            success=True,
        )
        del body["code"]  # as recorded: a removal's Status carries no code
        return body

    def _grace(self, rt: ResourceType, obj: Json, asked: int | None) -> int:
        """The grace period of a deletion: only a pod on a node, not finished, has one."""
        if (rt.group, rt.plural) != ("", "pods"):
            return 0
        spec = obj.get("spec") or {}
        if not spec.get("nodeName") or (obj.get("status") or {}).get("phase") in TERMINAL_PHASES:
            return 0
        if asked is not None:
            return asked
        value = spec.get("terminationGracePeriodSeconds")
        return int(value) if isinstance(value, int) else 30

    def _remove(self, rt: ResourceType, old: Json) -> Json:
        if rt.group == "" and rt.plural == "namespaces":
            name = old["metadata"]["name"]
            for other in self.types.values():
                if other.namespaced:
                    for obj in list(self.items(other, name)):
                        if self.find(other, name, obj["metadata"]["name"]) is not None:
                            self._remove(other, obj)
        gone = copy_json(old)
        self._commit(rt, "DELETED", gone, old)
        self._after_write(rt, gone)
        return gone
