"""A model of the garbage collector (kube-controller-manager), as gc-owned-podgroup shows.

- A dependent whose owners are all gone (not found, or found with another uid) is
  deleted in the background; owners that are gone are dropped from a dependent that
  still has others.
- An owner deleted with ``propagationPolicy: Foreground`` carries the
  ``foregroundDeletion`` finalizer: its dependents are deleted, and once none with
  ``blockOwnerDeletion`` remain the finalizer goes (and with it the owner).
- An owner deleted with ``Orphan`` carries the ``orphan`` finalizer: the ownerReferences
  to it are removed from its dependents, then the finalizer.

The real collector watches every resource; this model lists the kinds in ``KINDS``.
"""

from __future__ import annotations

from tests.controllers.common import drop_finalizer
from tests.controllers.rest import Json, Rest, RestError

__all__ = ["KINDS", "GarbageCollector"]

# (apiVersion, plural, kind) of what the model looks after.
KINDS: tuple[tuple[str, str, str], ...] = (
    ("v1", "pods", "Pod"),
    ("v1", "configmaps", "ConfigMap"),
    ("batch/v1", "jobs", "Job"),
    ("scheduling.volcano.sh/v1beta1", "podgroups", "PodGroup"),
    ("scheduling.x-k8s.io/v1alpha1", "podgroups", "PodGroup"),
)


class GarbageCollector:
    name = "garbage-collector"

    def __init__(self, rest: Rest, kinds: tuple[tuple[str, str, str], ...] = KINDS) -> None:
        self.rest = rest
        self.kinds = kinds

    async def close(self) -> None:
        await self.rest.close()

    async def step(self) -> bool:
        objects: list[tuple[str, str, Json]] = []
        for api_version, plural, _ in self.kinds:
            try:
                items = await self.rest.list(api_version, plural)
            except RestError as e:
                if e.status == 404:  # a resource this server does not serve
                    continue
                raise
            objects += [(api_version, plural, o) for o in items]
        alive: dict[tuple[str, str, str, str], Json] = {}
        for api_version, _, o in objects:
            m = o["metadata"]
            alive[(api_version, o.get("kind", ""), m.get("namespace", ""), m["name"])] = o
        dependents: dict[str, list[tuple[str, str, Json, Json]]] = {}
        for api_version, plural, o in objects:
            for ref in o["metadata"].get("ownerReferences") or ():
                dependents.setdefault(str(ref.get("uid")), []).append((api_version, plural, o, ref))

        changed = False
        for api_version, plural, owner in objects:
            meta = owner["metadata"]
            if not meta.get("deletionTimestamp"):
                continue
            fins = meta.get("finalizers") or ()
            deps = dependents.get(meta["uid"], [])
            if "orphan" in fins:
                # the dependents first; the finalizer goes once none refers to the owner
                for d_av, d_pl, d, _ in deps:
                    refs = [
                        r
                        for r in d["metadata"].get("ownerReferences") or ()
                        if r.get("uid") != meta["uid"]
                    ]
                    await self._patch_refs(d_av, d_pl, d, refs)
                    changed = True
                if not deps:
                    changed |= await drop_finalizer(self.rest, api_version, plural, owner, "orphan")
            elif "foregroundDeletion" in fins:
                blocking = 0
                for d_av, d_pl, d, ref in deps:
                    if ref.get("blockOwnerDeletion"):
                        blocking += 1
                    if not d["metadata"].get("deletionTimestamp"):
                        await self._delete(d_av, d_pl, d, "Background")
                        changed = True
                if not blocking:
                    changed |= await drop_finalizer(
                        self.rest, api_version, plural, owner, "foregroundDeletion"
                    )

        for api_version, plural, d in objects:
            refs = d["metadata"].get("ownerReferences") or ()
            if not refs or d["metadata"].get("deletionTimestamp"):
                continue
            present = [r for r in refs if self._owner_present(r, d, alive)]
            if not present:
                await self._delete(api_version, plural, d, "Background")
                changed = True
            elif len(present) < len(refs):
                await self._patch_refs(api_version, plural, d, present)
                changed = True
        return changed

    def _owner_present(
        self, ref: Json, dep: Json, alive: dict[tuple[str, str, str, str], Json]
    ) -> bool:
        known = {(av, kind) for av, _, kind in self.kinds}
        if (ref.get("apiVersion"), ref.get("kind")) not in known:
            return True  # an owner of a kind this model does not list: leave it be
        ns = dep["metadata"].get("namespace", "")
        owner = alive.get(
            (str(ref.get("apiVersion")), str(ref.get("kind")), ns, str(ref.get("name")))
        )
        return owner is not None and owner["metadata"].get("uid") == ref.get("uid")

    async def _delete(self, api_version: str, plural: str, obj: Json, policy: str) -> None:
        m = obj["metadata"]
        await self.rest.delete(
            api_version,
            plural,
            m.get("namespace", ""),
            m["name"],
            {"propagationPolicy": policy, "preconditions": {"uid": m["uid"]}},
        )

    async def _patch_refs(self, api_version: str, plural: str, obj: Json, refs: list[Json]) -> None:
        m = obj["metadata"]
        try:
            await self.rest.patch(
                api_version,
                plural,
                m.get("namespace", ""),
                m["name"],
                {
                    "metadata": {
                        "ownerReferences": refs or None,
                        "resourceVersion": m["resourceVersion"],
                    }
                },
            )
        except RestError as e:
            if e.status not in (404, 409):
                raise
