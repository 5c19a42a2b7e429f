"""The state of the in-memory API server: typed objects, resourceVersions, a bounded
change history, watchers, a disruption-budget controller and the eviction rules.

Everything here is synchronous and runs on the event loop, so each write is atomic with
respect to watches: a change is committed, recorded and fanned out to every watcher
before anything else runs. Stored objects are never changed in place (a write stores a
new dict), so the history can hold references to old versions.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import itertools
import math
import re
import uuid
from collections import OrderedDict, deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import jsonpatch
import jsonpointer
import orjson
from gangplace.kube.selectors import FieldSelector, LabelSelector, SelectorError, field_value

from .defaults import default_pod
from .strategic import StrategicPatchError, strategic_merge

Json = dict[str, Any]
Key = tuple[str, str]  # (namespace, name); namespace "" for cluster-scoped objects

__all__ = [
    "ApiStatusError",
    "ApiStore",
    "Change",
    "ResourceType",
    "Watch",
    "status_body",
]

_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_TERMINAL = ("Succeeded", "Failed")
_POD_FIELDS = frozenset(
    {
        "spec.nodeName",
        "spec.schedulerName",
        "spec.restartPolicy",
        "spec.serviceAccountName",
        "spec.hostNetwork",
        "status.phase",
        "status.podIP",
        "status.nominatedNodeName",
    }
)
_EVENT_FIELDS = frozenset(
    {
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    }
)


def now_iso(offset: float = 0.0) -> str:
    t = datetime.now(UTC).timestamp() + offset
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# Kinds the API server keeps no metadata.generation for (their strategies never set it).
_NO_GENERATION = frozenset(
    {
        ("", "pods"),
        ("", "nodes"),
        ("", "namespaces"),
        ("", "events"),
        ("", "configmaps"),
        ("", "secrets"),
        ("", "serviceaccounts"),
        ("events.k8s.io", "events"),
        ("coordination.k8s.io", "leases"),
        ("rbac.authorization.k8s.io", "roles"),
        ("rbac.authorization.k8s.io", "rolebindings"),
        ("rbac.authorization.k8s.io", "clusterroles"),
        ("rbac.authorization.k8s.io", "clusterrolebindings"),
    }
)
# Kinds whose updates must name a resourceVersion (AllowUnconditionalUpdate false).
_CONDITIONAL_UPDATE = frozenset({("coordination.k8s.io", "leases")})


def status_body(
    code: int, reason: str, message: str, details: Json | None = None, success: bool = False
) -> Json:
    body: Json = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success" if success else "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details:
        body["details"] = {k: v for k, v in details.items() if v != ""}
    if success:
        del body["reason"]
        if not message:
            del body["message"]
    return body


class ApiStatusError(Exception):
    """An error the server answers with a Status body."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        details: Json | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(f"{code} {reason}: {message}")
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.headers = dict(headers or {})

    def body(self) -> Json:
        return status_body(self.code, self.reason, self.message, self.details)


@dataclass(frozen=True, slots=True)
class ResourceType:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    status_subresource: bool = True
    builtin: bool = True  # list items of built-in types carry no kind/apiVersion
    field_labels: frozenset[str] = frozenset()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def gvr(self) -> tuple[str, str, str]:
        return (self.group, self.version, self.plural)

    @property
    def qualified(self) -> str:
        """``pods`` or ``leases.coordination.k8s.io``, as messages name a resource."""
        return f"{self.plural}.{self.group}" if self.group else self.plural


BUILTIN_TYPES: tuple[ResourceType, ...] = (
    ResourceType("", "v1", "pods", "Pod", True, field_labels=_POD_FIELDS),
    ResourceType("", "v1", "nodes", "Node", False, field_labels=frozenset({"spec.unschedulable"})),
    ResourceType(
        "", "v1", "namespaces", "Namespace", False, field_labels=frozenset({"status.phase"})
    ),
    ResourceType("", "v1", "events", "Event", True, False, field_labels=_EVENT_FIELDS),
    ResourceType("", "v1", "configmaps", "ConfigMap", True, False),
    ResourceType("", "v1", "secrets", "Secret", True, False),
    ResourceType("batch", "v1", "jobs", "Job", True),
    ResourceType(
        "admissionregistration.k8s.io",
        "v1",
        "mutatingwebhookconfigurations",
        "MutatingWebhookConfiguration",
        False,
        False,
    ),
    ResourceType("events.k8s.io", "v1", "events", "Event", True, False),
    ResourceType("coordination.k8s.io", "v1", "leases", "Lease", True, False),
    ResourceType("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False, False),
    ResourceType("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True),
)

# The custom resources corral uses, as their CustomResourceDefinitions declare them (a
# test checks this table against the published CRDs).
CUSTOM_TYPES: tuple[ResourceType, ...] = (
    ResourceType(
        "scheduling.volcano.sh", "v1beta1", "podgroups", "PodGroup", True, False, builtin=False
    ),
    ResourceType("scheduling.volcano.sh", "v1beta1", "queues", "Queue", False, True, builtin=False),
    ResourceType(
        "scheduling.x-k8s.io", "v1alpha1", "podgroups", "PodGroup", True, True, builtin=False
    ),
)


@dataclass(slots=True)
class Change:
    rv: int
    rt: ResourceType
    type: str  # ADDED, MODIFIED, DELETED
    obj: Json
    old: Json | None


@dataclass(eq=False, slots=True)
class Watch:
    rt: ResourceType
    namespace: str | None
    labels: LabelSelector
    fields: FieldSelector
    queue: asyncio.Queue[tuple[str, Json] | None] = field(default_factory=asyncio.Queue)

    def matches(self, obj: Json) -> bool:
        meta = obj.get("metadata") or {}
        if self.namespace and meta.get("namespace") != self.namespace:
            return False
        return self.labels.matches(meta.get("labels")) and self.fields.matches(
            lambda f: field_value(obj, f)
        )

    def event_for(self, ch: Change) -> tuple[str, Json] | None:
        """The event this watcher sees for a change: a change that moves an object into or
        out of the selection is an ADDED or DELETED, as the API server sends it."""
        new_match = self.matches(ch.obj)
        if ch.type == "ADDED":
            return ("ADDED", ch.obj) if new_match else None
        if ch.type == "DELETED":
            return ("DELETED", ch.obj) if new_match else None
        old_match = ch.old is not None and self.matches(ch.old)
        if new_match:
            return ("MODIFIED" if old_match else "ADDED", ch.obj)
        return ("DELETED", ch.obj) if old_match else None


@dataclass(slots=True)
class _Continuation:
    rv: int
    items: list[Json]


def _copy(obj: Any) -> Any:
    """A deep copy of plain JSON."""
    return orjson.loads(orjson.dumps(obj))


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


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


class ApiStore:
    """Objects by type; see the module docstring. ``history`` bounds how many changes are
    kept for watches to resume from; a resourceVersion older than that is 410 Gone."""

    def __init__(self, history: int = 10_000, require_namespaces: bool = True) -> None:
        self.types: dict[tuple[str, str, str], ResourceType] = {}
        self.objects: dict[tuple[str, str, str], dict[Key, Json]] = {}
        self.rv = 1000
        self.history: deque[Change] = deque(maxlen=max(1, history))
        self.compacted_rv = self.rv
        self.watches: set[Watch] = set()
        self.require_namespaces = require_namespaces
        # The disruption controller's memory: pods evicted under a budget, and those gone
        # and not yet replaced, by budget.
        self._evicted: set[str] = set()
        self._unreplaced: dict[Key, dict[str, str]] = {}
        self._continues: OrderedDict[str, _Continuation] = OrderedDict()
        self._continue_ids = itertools.count(1)
        for rt in (*BUILTIN_TYPES, *CUSTOM_TYPES):
            self.register(rt)

    # --- types ------------------------------------------------------------------------

    def register(self, rt: ResourceType) -> ResourceType:
        self.types[rt.gvr] = rt
        self.objects.setdefault(rt.gvr, {})
        return rt

    def register_crd(self, crd: Mapping[str, Any]) -> list[ResourceType]:
        """Register every served version of a CustomResourceDefinition object."""
        spec = crd.get("spec") or {}
        names = spec.get("names") or {}
        out = []
        for v in spec.get("versions") or ():
            if v.get("served", True):
                out.append(
                    self.register(
                        ResourceType(
                            str(spec["group"]),
                            str(v["name"]),
                            str(names["plural"]),
                            str(names["kind"]),
                            spec.get("scope") == "Namespaced",
                            "status" in (v.get("subresources") or {}),
                            builtin=False,
                        )
                    )
                )
        return out

    def resource(self, plural: str, group: str = "", version: str | None = None) -> ResourceType:
        for rt in self.types.values():
            if rt.plural == plural and rt.group == group and version in (None, rt.version):
                return rt
        raise KeyError(f"no resource {plural}.{group} registered")

    def _type_of(self, obj: Mapping[str, Any]) -> ResourceType:
        api_version, kind = obj.get("apiVersion"), obj.get("kind")
        for rt in self.types.values():
            if rt.api_version == api_version and rt.kind == kind:
                return rt
        raise KeyError(f"no resource registered for apiVersion {api_version!r} kind {kind!r}")

    def _type_cache(self) -> dict[tuple[Any, Any], ResourceType]:
        return {(rt.api_version, rt.kind): rt for rt in self.types.values()}

    # --- reading ----------------------------------------------------------------------

    def get(self, rt: ResourceType, namespace: str, name: str) -> Json:
        obj = self.objects[rt.gvr].get((namespace if rt.namespaced else "", name))
        if obj is None:
            raise ApiStatusError(
                404,
                "NotFound",
                f'{rt.qualified} "{name}" not found',
                {"name": name, "group": rt.group, "kind": rt.plural},
            )
        return obj

    def find(self, rt: ResourceType, namespace: str, name: str) -> Json | None:
        return self.objects[rt.gvr].get((namespace if rt.namespaced else "", name))

    def items(self, rt: ResourceType, namespace: str | None = None) -> Iterator[Json]:
        for (ns, _), obj in self.objects[rt.gvr].items():
            if not namespace or ns == namespace:
                yield obj

    def _selectors(
        self, rt: ResourceType, label_selector: str | None, field_selector: str | None
    ) -> tuple[LabelSelector, FieldSelector]:
        try:
            labels = LabelSelector.parse(label_selector)
            fields = FieldSelector.parse(field_selector)
        except SelectorError as e:
            raise ApiStatusError(400, "BadRequest", str(e)) from None
        allowed = rt.field_labels | {"metadata.name", "metadata.namespace"}
        for f in fields.fields:
            if f not in allowed:
                raise ApiStatusError(
                    400,
                    "BadRequest",
                    f"field label not supported: {f} (supported for {rt.qualified}: "
                    f"{', '.join(sorted(allowed))})",
                )
        return labels, fields

    def _select(
        self,
        rt: ResourceType,
        namespace: str | None,
        labels: LabelSelector,
        fields: FieldSelector,
    ) -> list[Json]:
        w = Watch(rt, namespace, labels, fields)
        objs = self.objects[rt.gvr]
        return [objs[k] for k in sorted(objs) if w.matches(objs[k])]

    def list(
        self,
        rt: ResourceType,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int = 0,
        continue_token: str | None = None,
        resource_version: str | None = None,
        resource_version_match: str | None = None,
    ) -> Json:
        """A List object, one page of it when ``limit`` is set (pages of one list are a
        consistent snapshot, as the API server guarantees)."""
        if continue_token:
            cont_id, pos = self._decode_continue(continue_token)
            cont = self._continues.get(cont_id)
            if cont is None:
                raise ApiStatusError(
                    410,
                    "Expired",
                    "The provided continue parameter is too old to display a consistent list "
                    "result. You can start a new list without the continue parameter.",
                )
            self._continues.move_to_end(cont_id)
            return self._page(rt, cont.items, pos, limit, cont.rv, cont_id)
        labels, fields = self._selectors(rt, label_selector, field_selector)
        rv = self.rv
        if resource_version not in (None, "", "0"):
            try:
                wanted = int(str(resource_version))
            except ValueError:
                raise ApiStatusError(
                    400, "BadRequest", f"invalid resourceVersion {resource_version!r}"
                ) from None
            if wanted > self.rv:
                raise ApiStatusError(
                    504,
                    "Timeout",
                    f"Too large resource version: {wanted}, current: {self.rv}",
                    headers={"Retry-After": "1"},
                )
            if resource_version_match == "Exact":
                if wanted < self.compacted_rv:
                    raise ApiStatusError(
                        410,
                        "Expired",
                        f"The resourceVersion for the provided list is too old: {wanted} "
                        f"(oldest available: {self.compacted_rv})",
                    )
                items = self._as_of(rt, wanted, namespace, labels, fields)
                return self._page(rt, items, 0, limit, wanted, None)
        items = self._select(rt, namespace, labels, fields)
        return self._page(rt, items, 0, limit, rv, None)

    def _as_of(
        self,
        rt: ResourceType,
        rv: int,
        namespace: str | None,
        labels: LabelSelector,
        fields: FieldSelector,
    ) -> list[Json]:
        """The objects as they were at resourceVersion ``rv``: undo later changes."""
        state = dict(self.objects[rt.gvr])
        for ch in reversed(self.history):
            if ch.rv <= rv:
                break
            if ch.rt.gvr != rt.gvr:
                continue
            meta = ch.obj.get("metadata") or {}
            key = (meta.get("namespace", "") if rt.namespaced else "", meta["name"])
            if ch.type == "ADDED":
                state.pop(key, None)
            elif ch.old is not None:
                state[key] = ch.old
        w = Watch(rt, namespace, labels, fields)
        return [state[k] for k in sorted(state) if w.matches(state[k])]

    def _page(
        self,
        rt: ResourceType,
        items: list[Json],
        pos: int,
        limit: int,
        rv: int,
        cont_id: str | None,
    ) -> Json:
        meta: Json = {"resourceVersion": str(rv)}
        end = len(items) if not limit else min(len(items), pos + limit)
        if end < len(items):
            if cont_id is None:
                cont_id = str(next(self._continue_ids))
                self._continues[cont_id] = _Continuation(rv, items)
                while len(self._continues) > 64:
                    self._continues.popitem(last=False)
            meta["continue"] = base64.urlsafe_b64encode(
                orjson.dumps({"id": cont_id, "pos": end, "rv": rv})
            ).decode()
            meta["remainingItemCount"] = len(items) - end
        elif cont_id is not None:
            self._continues.pop(cont_id, None)
        page = items[pos:end]
        if rt.builtin:
            page = [{k: v for k, v in o.items() if k not in ("kind", "apiVersion")} for o in page]
        return {
            "kind": f"{rt.kind}List",
            "apiVersion": rt.api_version,
            "metadata": meta,
            "items": page,
        }

    def _decode_continue(self, token: str) -> tuple[str, int]:
        try:
            raw = orjson.loads(base64.urlsafe_b64decode(token.encode()))
            return str(raw["id"]), int(raw["pos"])
        except (ValueError, KeyError, TypeError):
            raise ApiStatusError(
                400, "BadRequest", f"continue key is not valid: {token!r}"
            ) from None

    def expire_continues(self) -> None:
        """Forget every open paged list (the next page of each is 410 Expired)."""
        self._continues.clear()

    # --- watching ---------------------------------------------------------------------

    def watch(
        self,
        rt: ResourceType,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        resource_version: str | None = None,
    ) -> Watch:
        """Register a watcher, with its first events already queued: every matching object
        as ADDED when ``resource_version`` is unset or "0", else the changes after it.
        410 Expired when those changes are no longer in the history."""
        labels, fields = self._selectors(rt, label_selector, field_selector)
        w = Watch(rt, namespace, labels, fields)
        if resource_version in (None, "", "0"):
            for obj in self._select(rt, namespace, labels, fields):
                w.queue.put_nowait(("ADDED", obj))
        else:
            try:
                since = int(str(resource_version))
            except ValueError:
                raise ApiStatusError(
                    400, "BadRequest", f"invalid resourceVersion {resource_version!r}"
                ) from None
            if since < self.compacted_rv:
                raise ApiStatusError(
                    410, "Expired", f"too old resource version: {since} ({self.compacted_rv})"
                )
            for ch in self.history:
                if ch.rv > since and ch.rt.gvr == rt.gvr:
                    ev = w.event_for(ch)
                    if ev:
                        w.queue.put_nowait(ev)
        self.watches.add(w)
        return w

    def unwatch(self, w: Watch) -> None:
        self.watches.discard(w)

    def close_watches(self) -> int:
        """End every open watch stream (cleanly); how many there were."""
        n = len(self.watches)
        for w in list(self.watches):
            w.queue.put_nowait(None)
        self.watches.clear()
        return n

    def compact(self) -> None:
        """Drop the whole history: every resourceVersion before now becomes too old."""
        self.history.clear()
        self.compacted_rv = self.rv

    # --- writing ----------------------------------------------------------------------

    def _commit(self, rt: ResourceType, kind: str, obj: Json, old: Json | None) -> Json:
        if rt.plural == "pods" and rt.group == "":
            # Typed serialisation: a pod condition always has both times, null when unset.
            for c in (obj.get("status") or {}).get("conditions") or ():
                c.setdefault("lastProbeTime", None)
                c.setdefault("lastTransitionTime", None)
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        meta = obj["metadata"]
        key = (meta.get("namespace", "") if rt.namespaced else "", meta["name"])
        if kind == "DELETED":
            self.objects[rt.gvr].pop(key, None)
        else:
            self.objects[rt.gvr][key] = obj
        if len(self.history) == self.history.maxlen:
            self.compacted_rv = self.history[0].rv
        ch = Change(self.rv, rt, kind, obj, old)
        self.history.append(ch)
        for w in self.watches:
            if w.rt.gvr == rt.gvr:
                ev = w.event_for(ch)
                if ev:
                    w.queue.put_nowait(ev)
        return obj

    def _after_write(self, rt: ResourceType, obj: Json, created: bool = False) -> None:
        """Controllers the server runs itself: disruption budgets follow their pods."""
        if rt.plural == "pods" and rt.group == "":
            ns = obj["metadata"].get("namespace", "")
            gone = self.find(rt, ns, obj["metadata"]["name"]) is None
            self._sync_pdbs(ns, new_pod=obj if created else None, gone_pod=obj if gone else None)
            if gone:
                self._evicted.discard(f"{ns}/{obj['metadata']['name']}")
        elif rt.plural == "poddisruptionbudgets":
            self._sync_pdbs(obj["metadata"].get("namespace", ""), only=obj["metadata"]["name"])

    def _check_namespace(self, rt: ResourceType, namespace: str) -> None:
        if rt.namespaced and self.require_namespaces:
            ns_type = self.types[("", "v1", "namespaces")]
            if self.find(ns_type, "", namespace) is None:
                raise ApiStatusError(
                    404,
                    "NotFound",
                    f'namespaces "{namespace}" not found',
                    {"name": namespace, "kind": "namespaces"},
                )

    def _validate(self, rt: ResourceType, obj: Json) -> None:
        name = obj["metadata"].get("name", "")
        if len(name) > 253 or not _NAME.match(name):
            raise ApiStatusError(
                422,
                "Invalid",
                f'{rt.kind} "{name}" is invalid: metadata.name: Invalid value: "{name}": '
                "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                "characters, '-' or '.', and must start and end with an alphanumeric character",
            )
        if rt.plural == "poddisruptionbudgets":
            spec = obj.get("spec") or {}
            try:
                LabelSelector.from_json(spec.get("selector"), "spec.selector")
            except SelectorError as e:
                raise ApiStatusError(
                    422, "Invalid", f'PodDisruptionBudget "{name}" is invalid: {e}'
                ) from None
            for k in ("minAvailable", "maxUnavailable"):
                v = spec.get(k)
                if v is not None and not (
                    (isinstance(v, int) and not isinstance(v, bool) and v >= 0)
                    or (isinstance(v, str) and re.fullmatch(r"\d+%?", v))
                ):
                    raise ApiStatusError(
                        422,
                        "Invalid",
                        f'PodDisruptionBudget "{name}" is invalid: spec.{k}: Invalid value: '
                        f"{v!r}: must be a non-negative integer or a percentage",
                    )
            if spec.get("minAvailable") is not None and spec.get("maxUnavailable") is not None:
                raise ApiStatusError(
                    422,
                    "Invalid",
                    f'PodDisruptionBudget "{name}" is invalid: spec: Invalid value: '
                    "minAvailable and maxUnavailable cannot be both set",
                )

    def _prepare_new(self, rt: ResourceType, namespace: str, body: Any) -> Json:
        if not isinstance(body, dict):
            raise ApiStatusError(400, "BadRequest", "the body must be a JSON object")
        obj = _copy(body)
        if (
            obj.get("kind", rt.kind) != rt.kind
            or obj.get("apiVersion", rt.api_version) != rt.api_version
        ):
            raise ApiStatusError(
                400,
                "BadRequest",
                f"the object is {obj.get('apiVersion')}/{obj.get('kind')}, "
                f"the request is for {rt.api_version}/{rt.kind}",
            )
        obj["kind"], obj["apiVersion"] = rt.kind, rt.api_version
        meta = obj.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise ApiStatusError(400, "BadRequest", "metadata must be an object")
        if rt.namespaced:
            if meta.get("namespace") and meta["namespace"] != namespace:
                raise ApiStatusError(
                    400,
                    "BadRequest",
                    "the namespace of the provided object does not match the namespace sent "
                    "on the request",
                )
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
        for k in ("labels", "annotations", "finalizers", "ownerReferences"):
            if k in meta and not meta[k]:
                del meta[k]  # empty is omitted, as typed serialisation does
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = f"{meta['generateName']}{uuid.uuid4().hex[:5]}"
        if not meta.get("name"):
            raise ApiStatusError(
                422,
                "Invalid",
                f"{rt.kind} is invalid: metadata.name: Required value: name is required",
            )
        return obj

    def create(self, rt: ResourceType, namespace: str, body: Any, *, dry_run: bool = False) -> Json:
        obj = self._prepare_new(rt, namespace if rt.namespaced else "", body)
        meta = obj["metadata"]
        self._validate(rt, obj)
        self._check_namespace(rt, namespace)
        if self.find(rt, namespace, meta["name"]) is not None:
            raise ApiStatusError(
                409,
                "AlreadyExists",
                f'{rt.qualified} "{meta["name"]}" already exists',
                {"name": meta["name"], "group": rt.group, "kind": rt.plural},
            )
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now_iso()
        if (rt.group, rt.plural) in _NO_GENERATION:
            meta.pop("generation", None)
        else:
            meta["generation"] = 1
        for k in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds"):
            meta.pop(k, None)
        self._default(rt, obj)
        if dry_run:
            return obj
        self._commit(rt, "ADDED", obj, None)
        # The answer is the object as created, before the server's own controllers (the
        # disruption controller fills a new budget's status) write it again.
        answer = _copy(obj)
        self._after_write(rt, obj, created=True)
        return answer

    def _priority_of(self, name: str | None) -> int | None:
        classes = self.types[("scheduling.k8s.io", "v1", "priorityclasses")]
        for pc in self.items(classes):
            if pc["metadata"]["name"] == name or (name is None and pc.get("globalDefault")):
                value = pc.get("value")
                return int(value) if isinstance(value, int) else None
        return None

    def _default(self, rt: ResourceType, obj: Json) -> None:
        if rt.group == "" and rt.plural == "pods":
            default_pod(obj, self._priority_of)
        elif rt.group == "" and rt.plural == "namespaces":
            obj.setdefault("status", {}).setdefault("phase", "Active")
            labels = obj["metadata"].setdefault("labels", {})
            labels["kubernetes.io/metadata.name"] = obj["metadata"]["name"]
        elif rt.plural == "poddisruptionbudgets":
            # Zeros until the disruption controller has looked (no observedGeneration).
            obj["status"] = {
                "disruptionsAllowed": 0,
                "currentHealthy": 0,
                "desiredHealthy": 0,
                "expectedPods": 0,
            }

    def _updated(self, rt: ResourceType, old: Json, body: Any, subresource: str) -> Json:
        """The object a PUT or PATCH of ``body`` makes of ``old``."""
        meta_old = old["metadata"]
        obj = self._prepare_new(rt, meta_old.get("namespace", ""), body)
        meta = obj["metadata"]
        if meta["name"] != meta_old["name"]:
            raise ApiStatusError(
                400,
                "BadRequest",
                f"the name of the object ({meta['name']}) does not match the name on the URL "
                f"({meta_old['name']})",
            )
        wanted_rv = meta.get("resourceVersion")
        if not wanted_rv and (rt.group, rt.plural) in _CONDITIONAL_UPDATE:
            msg = "Invalid value: 0x0: must be specified for an update"
            raise ApiStatusError(
                422,
                "Invalid",
                f'{rt.qualified} "{meta_old["name"]}" is invalid: metadata.resourceVersion: {msg}',
                {
                    "name": meta_old["name"],
                    "group": rt.group,
                    "kind": rt.plural,
                    "causes": [
                        {
                            "reason": "FieldValueInvalid",
                            "message": msg,
                            "field": "metadata.resourceVersion",
                        }
                    ],
                },
            )
        if wanted_rv and wanted_rv != meta_old["resourceVersion"]:
            raise ApiStatusError(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on {rt.qualified} "{meta_old["name"]}": the '
                "object has been modified; please apply your changes to the latest version "
                "and try again",
                {"name": meta_old["name"], "group": rt.group, "kind": rt.plural},
            )
        for k in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds"):
            if k in meta_old:
                meta[k] = meta_old[k]
            else:
                meta.pop(k, None)
        if "generation" in meta_old:
            meta["generation"] = meta_old["generation"]
        else:
            meta.pop("generation", None)
        meta["resourceVersion"] = meta_old["resourceVersion"]
        if subresource == "status":
            new = _copy(old)
            new["status"] = obj.get("status")
            if new["status"] is None:
                del new["status"]
            return new
        if rt.status_subresource:
            if "status" in old:
                obj["status"] = old["status"]
            else:
                obj.pop("status", None)
        if obj.get("spec") != old.get("spec") and "generation" in meta_old:
            meta["generation"] = meta_old["generation"] + 1
        self._validate(rt, obj)
        return obj

    def _write_update(self, rt: ResourceType, old: Json, new: Json, dry_run: bool) -> Json:
        if new == old or dry_run:
            return new  # a no-op write changes nothing, as in the API server
        self._commit(rt, "MODIFIED", new, old)
        meta = new["metadata"]
        if self._finished(new):
            # The last finalizer of an object being deleted went: it goes now.
            gone = _copy(new)
            self._commit(rt, "DELETED", gone, new)
            self._after_write(rt, gone)
            return new
        self._after_write(rt, new)
        return self.find(rt, meta.get("namespace", ""), meta["name"]) or new

    @staticmethod
    def _finished(obj: Json) -> bool:
        """Being deleted, no finalizer left and no grace period still running."""
        meta = obj["metadata"]
        return (
            bool(meta.get("deletionTimestamp"))
            and not meta.get("finalizers")
            and not meta.get("deletionGracePeriodSeconds")
        )

    def replace(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        body: Any,
        *,
        subresource: str = "",
        dry_run: bool = False,
    ) -> Json:
        old = self.get(rt, namespace, name)
        return self._write_update(rt, old, self._updated(rt, old, body, subresource), dry_run)

    def patch(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        content_type: str,
        patch: Any,
        *,
        subresource: str = "",
        dry_run: bool = False,
    ) -> Json:
        """merge-patch, strategic-merge-patch (built-in kinds only) or json-patch."""
        old = self.get(rt, namespace, name)
        base = _copy(old)
        if content_type == "application/strategic-merge-patch+json":
            if not rt.builtin:
                raise ApiStatusError(
                    415,
                    "UnsupportedMediaType",
                    "the body of the request was in an unknown format - accepted media types "
                    "include: application/json-patch+json, application/merge-patch+json, "
                    "application/apply-patch+yaml",
                )
            try:
                body = strategic_merge(base, patch)
            except StrategicPatchError as e:
                raise ApiStatusError(400, "BadRequest", str(e)) from None
        elif content_type == "application/merge-patch+json":
            if not isinstance(patch, dict):
                raise ApiStatusError(400, "BadRequest", "a merge patch must be a JSON object")
            body = merge_patch(base, patch)
        elif content_type == "application/json-patch+json":
            if not isinstance(patch, list):
                raise ApiStatusError(400, "BadRequest", "a JSON patch must be a JSON array")
            try:
                body = jsonpatch.JsonPatch(patch).apply(base)
            except jsonpatch.JsonPatchTestFailed as e:
                raise ApiStatusError(422, "Invalid", f"the JSON patch test failed: {e}") from None
            except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException) as e:
                raise ApiStatusError(
                    422, "Invalid", f"the JSON patch cannot be applied: {e}"
                ) from None
        else:
            raise ApiStatusError(
                415,
                "UnsupportedMediaType",
                f"the body of the request was in an unknown format - accepted media types "
                f"include: application/json-patch+json, application/merge-patch+json, "
                f"application/strategic-merge-patch+json (got {content_type!r})",
            )
        # The patch may name a resourceVersion (a precondition); otherwise it is the current,
        # and a patch is never refused as an unconditional update.
        if isinstance(body, dict) and isinstance(body.get("metadata"), dict):
            body["metadata"].setdefault("resourceVersion", old["metadata"]["resourceVersion"])
        return self._write_update(rt, old, self._updated(rt, old, body, subresource), dry_run)

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
        new = _copy(old)
        nmeta = new["metadata"]
        current = nmeta.get("deletionGracePeriodSeconds")
        if not nmeta.get("deletionTimestamp") or (current is not None and grace < current):
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

    def _grace(self, rt: ResourceType, obj: Json, asked: int | None) -> int:
        """The grace period of a deletion: only a pod on a node, not finished, has one."""
        if (rt.group, rt.plural) != ("", "pods"):
            return 0
        spec = obj.get("spec") or {}
        if not spec.get("nodeName") or (obj.get("status") or {}).get("phase") in _TERMINAL:
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
        gone = _copy(old)
        self._commit(rt, "DELETED", gone, old)
        self._after_write(rt, gone)
        return gone

    # --- disruption budgets and eviction ------------------------------------------------

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
        matching = [
            p
            for p in pods
            if (p.get("status") or {}).get("phase") not in _TERMINAL
            and selector.matches((p.get("metadata") or {}).get("labels"))
        ]
        old = pdb.get("status") or {}
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
        if pod["metadata"].get("deletionTimestamp"):
            # Already terminating: the eviction is done as far as the server is concerned.
            return status_body(201, "", "", success=True)
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
            *_TERMINAL,
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
                raise ApiStatusError(
                    500,
                    "InternalError",
                    "This pod has more than one PodDisruptionBudget, which the eviction "
                    "subresource does not support.",
                )
            if matching:
                self._check_budget(matching[0], pod)
                if not dry_run:
                    self._mark_disrupted(matching[0], name)
                    self._evicted.add(f"{namespace}/{name}")
        if not dry_run:
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
        """The condition the eviction handler sets before it deletes the pod."""
        new = _copy(pod)
        conditions = [
            c
            for c in (new.setdefault("status", {}).get("conditions") or ())
            if c.get("type") != "DisruptionTarget"
        ]
        conditions.append(
            {
                "type": "DisruptionTarget",
                "status": "True",
                "lastProbeTime": None,
                "lastTransitionTime": now_iso(),
                "reason": "EvictionByEvictionAPI",
                "message": "Eviction API: evicting",
            }
        )
        new["status"]["conditions"] = conditions
        self._commit(pods, "MODIFIED", new, pod)
        self._after_write(pods, new)

    def bind(self, namespace: str, name: str, body: Any) -> Json:
        """POST pods/{name}/binding: the scheduler's (or anyone's) assignment of a node. The
        server sets spec.nodeName and the PodScheduled condition itself."""
        pods = self.types[("", "v1", "pods")]
        if not isinstance(body, dict) or body.get("kind", "Binding") != "Binding":
            raise ApiStatusError(400, "BadRequest", "the body must be a Binding object")
        if (body.get("metadata") or {}).get("name") != name:
            raise ApiStatusError(
                400, "BadRequest", "name in URL does not match name in Binding object"
            )
        target = body.get("target") or {}
        node = target.get("name")
        if not node or target.get("kind", "Node") != "Node":
            raise ApiStatusError(
                422,
                "Invalid",
                f'Binding.core "{name}" is invalid: target.name: Required value',
            )
        pod = self.get(pods, namespace, name)

        def conflict(why: str) -> ApiStatusError:
            return ApiStatusError(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on pods/binding "{name}": {why}',
                {"name": name, "kind": "pods/binding"},
            )

        if pod["metadata"].get("deletionTimestamp"):
            raise conflict(f"pod {name} is being deleted, cannot be assigned to a host")
        current = (pod.get("spec") or {}).get("nodeName")
        if current:
            raise conflict(f'pod {name} is already assigned to node "{current}"')
        new = _copy(pod)
        new["spec"]["nodeName"] = node
        status = new.setdefault("status", {})
        conditions = [c for c in status.get("conditions") or () if c.get("type") != "PodScheduled"]
        conditions.append(
            {
                "type": "PodScheduled",
                "status": "True",
                "lastProbeTime": None,
                "lastTransitionTime": now_iso(),
            }
        )
        status["conditions"] = conditions
        self._commit(pods, "MODIFIED", new, pod)
        self._after_write(pods, new)
        return status_body(201, "", "", success=True)

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

    # --- bulk loading -----------------------------------------------------------------

    def load(self, objects: Iterable[Json]) -> int:
        """Store objects directly, without HTTP, history or watch events (for large test
        clusters). The objects are taken over, not copied. Missing namespaces are created.
        Watches opened before cannot resume across a load: the history is compacted."""
        ns_type = self.types[("", "v1", "namespaces")]
        touched: set[str] = set()
        n = 0
        ts = now_iso()
        by_kind = self._type_cache()
        for obj in objects:
            rt = by_kind.get((obj.get("apiVersion"), obj.get("kind"))) or self._type_of(obj)
            meta = obj.setdefault("metadata", {})
            if rt.namespaced:
                ns = meta.setdefault("namespace", "default")
                if (ns_key := ("", ns)) not in self.objects[ns_type.gvr]:
                    self.rv += 1
                    self.objects[ns_type.gvr][ns_key] = {
                        "kind": "Namespace",
                        "apiVersion": "v1",
                        "metadata": {
                            "name": ns,
                            "uid": str(uuid.uuid4()),
                            "resourceVersion": str(self.rv),
                            "creationTimestamp": ts,
                        },
                        "status": {"phase": "Active"},
                    }
                touched.add(ns)
            self.rv += 1
            meta.setdefault("uid", str(uuid.uuid4()))
            meta.setdefault("creationTimestamp", ts)
            meta.setdefault("generation", 1)
            meta["resourceVersion"] = str(self.rv)
            self.objects[rt.gvr][
                (meta.get("namespace", "") if rt.namespaced else "", meta["name"])
            ] = obj
            n += 1
        self.compact()
        pdb_type = self.types[("policy", "v1", "poddisruptionbudgets")]
        pods = self.types[("", "v1", "pods")]
        for ns in touched:
            pdbs = list(self.items(pdb_type, ns))
            if pdbs:
                ns_pods = list(self.items(pods, ns))
                for pdb in pdbs:
                    pdb["status"] = self._pdb_status(pdb, ns_pods)
        return n
