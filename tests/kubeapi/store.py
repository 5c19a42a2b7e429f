"""The state of the in-memory API server: typed objects and their resourceVersions,
creating, updating and patching them, and the controllers the server runs itself after
each write. Its other parts, one job each, are mixed in: lists (:mod:`.listing`), watches
and their history (:mod:`.watches`), deletion and finalizers (:mod:`.deletion`),
disruption budgets and eviction (:mod:`.disruption`), binding and tokens
(:mod:`.subresources`).

Everything here is synchronous and runs on the event loop, so each write is atomic with
respect to watches: a change is committed, recorded and fanned out to every watcher
before anything else runs. Stored objects are never changed in place (a write stores a
new dict), so the history can hold references to old versions.
"""

from __future__ import annotations

import itertools
import secrets
import uuid
from collections import OrderedDict, deque
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from tests.kubeapi.auth import TokenIssuer
from tests.kubeapi.crd_validation import custom_resource_errors, invalid_custom_resource
from tests.kubeapi.crds import crd_defaults, crd_status, prune, schema_of, validate_crd
from tests.kubeapi.defaults import (
    default_job,
    default_job_fields,
    default_pod,
    drop_disabled_job_fields,
)
from tests.kubeapi.deletion import Deletion
from tests.kubeapi.disruption import DisruptionBudgets
from tests.kubeapi.fields import drop_fields
from tests.kubeapi.job_validation import validate_job_create, validate_job_update
from tests.kubeapi.listing import Continuation, Listing
from tests.kubeapi.native_gangs import check_native, check_pod_group_ref, drop_disabled_pod_fields
from tests.kubeapi.patches import apply_patch
from tests.kubeapi.released_schemas import decode, decode_error
from tests.kubeapi.resources import (
    BUILTIN_TYPES,
    CUSTOM_TYPES,
    NATIVE_TYPES,
    VOLCANO_GROUP,
    ResourceType,
    copy_json,
    now_iso,
)
from tests.kubeapi.scheduler_crds import KAI_TYPES, kai_schemas, volcano_podgroup_schema
from tests.kubeapi.status import ApiStatusError
from tests.kubeapi.subresources import Subresources
from tests.kubeapi.validation import canonical_quantities, validate
from tests.kubeapi.versions import Release, Versions
from tests.kubeapi.watches import Change, Watch, Watching
from tests.kubeapi.workloads import default_workload

Json = dict[str, Any]
Key = tuple[str, str]  # (namespace, name); namespace "" for cluster-scoped objects

__all__ = ["ApiStore"]

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
_CRDS = ("apiextensions.k8s.io", "customresourcedefinitions")
# Built-in kinds whose strategy's PrepareForCreate throws away the status a create sends
# (kubernetes v1.28.7 ``pkg/registry/``: ``core/pod/strategy.go`` (then phase Pending and
# the qosClass, :func:`.defaults.default_pod`), ``core/namespace/strategy.go`` (then
# phase Active), ``batch/job/strategy.go``, ``batch/cronjob/strategy.go``,
# ``apps/deployment/strategy.go``, ``apps/statefulset/strategy.go``,
# ``apps/replicaset/strategy.go``, ``policy/poddisruptionbudget/strategy.go``, and
# apiextensions-apiserver ``pkg/registry/customresourcedefinition/strategy.go``). A Node
# keeps it (``core/node/strategy.go``: "Nodes allow *all* fields, including status, to be
# set on create"); a custom resource loses it when its CRD has a status subresource
# (apiextensions-apiserver ``pkg/registry/customresource/strategy.go``).
_STATUS_CLEARED_ON_CREATE = frozenset(
    {
        ("", "pods"),
        ("", "namespaces"),
        ("batch", "jobs"),
        ("batch", "cronjobs"),
        ("apps", "deployments"),
        ("apps", "statefulsets"),
        ("apps", "replicasets"),
        ("policy", "poddisruptionbudgets"),
        _CRDS,
    }
)

# The namespaces kube-apiserver makes at start (v1.28
# ``pkg/controlplane/controller/systemnamespaces/system_namespaces_controller.go`` and
# ``pkg/controlplane/instance.go``: default, kube-system, kube-public, kube-node-lease).
SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
_ROOT_CA = "kube-root-ca.crt"
_ROOT_CA_DESCRIPTION = (
    "Contains a CA bundle that can be used to verify the kube-apiserver when using internal "
    "endpoints such as the internal service IP or kubernetes.default.svc. No other usage is "
    "guaranteed across distributions of Kubernetes clusters."
)


# kube-apiserver's generated names: the prefix (cut to 58 characters) and five characters
# from an alphabet without vowels or look-alike digits, as the recordings' names show.
_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_GENERATED_PREFIX_MAX = 63 - 5


def _asked_name(body: Any) -> Any:
    meta = body.get("metadata") if isinstance(body, dict) else None
    return meta.get("name") if isinstance(meta, dict) else None


def generated_name(prefix: str) -> str:
    return prefix[:_GENERATED_PREFIX_MAX] + "".join(
        secrets.choice(_NAME_ALPHABET) for _ in range(5)
    )


class ApiStore(Listing, Watching, Deletion, DisruptionBudgets, Subresources):
    """Objects by type; see the module docstring. ``history`` bounds how many changes are
    kept for watches to resume from; a resourceVersion older than that is 410 Gone."""

    def __init__(
        self,
        history: int = 10_000,
        require_namespaces: bool = True,
        versions: Versions | None = None,
        *,
        system_namespaces: bool = True,
    ) -> None:
        self.types: dict[tuple[str, str, str], ResourceType] = {}
        self.objects: dict[tuple[str, str, str], dict[Key, Json]] = {}
        self.rv = 1000
        self.history: deque[Change] = deque(maxlen=max(1, history))
        self.compacted_rv = self.rv
        self.watches: set[Watch] = set()
        self.require_namespaces = require_namespaces
        self.tokens = TokenIssuer()
        # The disruption controller's memory: pods evicted under a budget, and those gone
        # and not yet replaced, by budget.
        self._evicted: set[str] = set()
        self._unreplaced: dict[Key, dict[str, str]] = {}
        self._continues: OrderedDict[str, Continuation] = OrderedDict()
        self._continue_ids = itertools.count(1)
        # the openAPIV3Schema of each version a stored CRD serves, for pruning
        self.schemas: dict[tuple[str, str, str], Mapping[str, Any]] = {}
        # unknown fields dropped from writes that reached the store with them (a JSON
        # patch, a write without HTTP), "Kind name: path" -- what Warn would warn of
        self.dropped: list[str] = []
        # the CA certificate (PEM) clients verify the server with, once it has one
        self.root_ca: str | None = None
        for rt in (*BUILTIN_TYPES, *NATIVE_TYPES, *CUSTOM_TYPES, *KAI_TYPES):
            self.register(rt)
        # the release of each component the server plays (tests/kubeapi/versions.py)
        self.versions = versions or Versions()
        if system_namespaces:
            ns_type = self.types[("", "v1", "namespaces")]
            for name in SYSTEM_NAMESPACES:
                self.create(ns_type, "", {"metadata": {"name": name}})

    @property
    def versions(self) -> Versions:
        return self._versions

    @versions.setter
    def versions(self, versions: Versions) -> None:
        """The stack; the gang schedulers' CRDs it installs come with it
        (:mod:`.scheduler_crds`): Volcano's PodGroup schema of its release, KAI's."""
        self._versions = versions
        volcano = ("scheduling.volcano.sh", "v1beta1", "podgroups")
        if versions.volcano is not None:
            self.schemas[volcano] = volcano_podgroup_schema(versions.volcano)
        else:
            self.schemas.pop(volcano, None)
        for gvr, schema in kai_schemas().items():
            if versions.kai:
                self.schemas[gvr] = schema
            else:
                self.schemas.pop(gvr, None)
        if versions.volcano is not None:
            self._install_volcano(versions.volcano)

    def _install_volcano(self, volcano: Release) -> None:
        """The Queues Volcano makes when it starts (:mod:`tests.controllers.volcano_queue`),
        opened by its queue controller."""
        from tests.controllers.volcano_queue import installed_queues

        rt = self.types[(VOLCANO_GROUP, "v1beta1", "queues")]
        for queue in installed_queues(volcano):
            if self.find(rt, "", queue["metadata"]["name"]) is None:
                self.create(rt, "", queue)

    def _sync_volcano_queue(self, rt: ResourceType, queue: Json) -> None:
        """Volcano's queue controller, when Volcano is in the stack."""
        from tests.controllers.volcano_queue import synced_status

        name = queue["metadata"]["name"]
        if self.versions.volcano is None or self.find(rt, "", name) is None:
            return
        status = synced_status(queue)
        if status is not None:
            self.replace(rt, "", name, {**queue, "status": status}, subresource="status")

    # --- types ------------------------------------------------------------------------

    def register(self, rt: ResourceType) -> ResourceType:
        self.types[rt.gvr] = rt
        self.objects.setdefault(rt.gvr, {})
        return rt

    def register_crd(self, crd: Mapping[str, Any]) -> list[ResourceType]:
        """Register every served version of a CustomResourceDefinition object (with its
        schema, by which its objects are pruned)."""
        spec = crd.get("spec") or {}
        names = spec.get("names") or {}
        out = []
        for v in spec.get("versions") or ():
            if v.get("served", True):
                rt = self.register(
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
                schema = schema_of(crd, rt.version)
                if schema is not None:
                    self.schemas[rt.gvr] = schema
                else:
                    self.schemas.pop(rt.gvr, None)
                out.append(rt)
        return out

    def unregister_crd(self, crd: Mapping[str, Any]) -> None:
        """A CRD is gone: its kinds are no longer served and their objects go with them
        (the real server's customresourcecleanup finalizer deletes them first)."""
        spec = crd.get("spec") or {}
        plural = (spec.get("names") or {}).get("plural")
        for gvr in [g for g in self.types if g[0] == spec.get("group") and g[2] == plural]:
            rt = self.types[gvr]
            for obj in list(self.items(rt)):
                meta = obj["metadata"]
                if self.find(rt, meta.get("namespace", ""), meta["name"]) is not None:
                    self._commit(rt, "DELETED", copy_json(obj), obj)
            del self.types[gvr]
            self.objects.pop(gvr, None)
            self.schemas.pop(gvr, None)

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

    def _schema_check(self, rt: ResourceType, obj: Json, who: str) -> None:
        """An object the server itself made or was given without a request (a default, a
        controller's write, a bulk load) still decodes by its release's schema; anything
        else is a bug of the model or the fixture, said as one."""
        if not rt.builtin:
            return
        found = decode(self.versions.kube, obj, rt.api_version, rt.kind)
        if found.mismatch is None and not found.unknown:
            return
        what = found.mismatch.message() if found.mismatch else ", ".join(found.unknown)
        meta = obj.get("metadata") or {}
        raise ValueError(
            f"{who} {rt.kind} {meta.get('namespace', '')}/{meta.get('name')} does not decode "
            f"by the Kubernetes {self.versions.kube} schema: {what}"
        )

    def _commit(self, rt: ResourceType, kind: str, obj: Json, old: Json | None) -> Json:
        if kind != "DELETED":
            self._schema_check(rt, obj, "the server would store")
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
        """Controllers the server runs itself: disruption budgets follow their pods; a
        stored CRD serves its kinds (none once it is gone); a new namespace gets its
        ``default`` ServiceAccount."""
        if (rt.group, rt.plural) == _CRDS:
            meta = obj["metadata"]
            if self.find(rt, "", meta["name"]) is None:
                self.unregister_crd(obj)
            else:
                self.register_crd(obj)
        elif (rt.group, rt.plural) == ("", "namespaces") and created:
            self._default_service_account(obj["metadata"]["name"])
            self._publish_root_ca(obj["metadata"]["name"])
        elif rt.plural == "pods" and rt.group == "":
            ns = obj["metadata"].get("namespace", "")
            gone = self.find(rt, ns, obj["metadata"]["name"]) is None
            self._sync_pdbs(ns, new_pod=obj if created else None, gone_pod=obj if gone else None)
            if gone:
                self._evicted.discard(f"{ns}/{obj['metadata']['name']}")
        elif rt.plural == "poddisruptionbudgets":
            self._sync_pdbs(obj["metadata"].get("namespace", ""), only=obj["metadata"]["name"])
        elif (rt.group, rt.plural) == (VOLCANO_GROUP, "queues"):
            self._sync_volcano_queue(rt, obj)

    def _default_service_account(self, namespace: str) -> None:
        """The serviceaccount controller of kube-controller-manager (v1.28
        ``pkg/controller/serviceaccount/serviceaccounts_controller.go``): every namespace
        has a ServiceAccount ``default`` (no token Secret since 1.24)."""
        sa = self.types[("", "v1", "serviceaccounts")]
        if self.find(sa, namespace, "default") is None:
            self.create(sa, namespace, {"metadata": {"name": "default"}})

    def publish_root_ca(self, pem: str) -> None:
        """Serve over TLS with this CA: every namespace, now and later, gets the
        ``kube-root-ca.crt`` ConfigMap."""
        self.root_ca = pem
        for ns in list(self.items(self.types[("", "v1", "namespaces")])):
            self._publish_root_ca(ns["metadata"]["name"])

    def _publish_root_ca(self, namespace: str) -> None:
        """The root CA publisher of kube-controller-manager (v1.28
        ``pkg/controller/certificates/rootcacertpublisher/publisher.go``)."""
        if self.root_ca is None:
            return
        cm = self.types[("", "v1", "configmaps")]
        if self.find(cm, namespace, _ROOT_CA) is None:
            self.create(
                cm,
                namespace,
                {
                    "metadata": {
                        "name": _ROOT_CA,
                        "annotations": {"kubernetes.io/description": _ROOT_CA_DESCRIPTION},
                    },
                    "data": {"ca.crt": self.root_ca},
                },
            )

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

    def _prepare_new(self, rt: ResourceType, namespace: str, body: Any) -> Json:
        if not isinstance(body, dict):
            raise ApiStatusError(400, "BadRequest", "the body must be a JSON object")
        obj = copy_json(body)
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
        if rt.builtin:
            # decoded by the release's schema (tests/kubeapi/released_schemas.py): a wrong
            # type fails decoding; an unknown field left here (a JSON patch, a write
            # without HTTP) is dropped as the default fieldValidation (Warn) does, and
            # listed in ``dropped``
            found = decode(self.versions.kube, obj, rt.api_version, rt.kind)
            if found.mismatch is not None:
                raise decode_error(rt.kind, rt.version, found.mismatch)
            if found.unknown:
                drop_fields(obj, list(found.unknown))
                name = _asked_name(obj) or ""
                self.dropped.extend(f"{rt.kind} {name}: {f}" for f in found.unknown)
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
        canonical_quantities(rt, obj)
        schema = self.schemas.get(rt.gvr)
        if schema is not None and not rt.builtin:
            prune(schema, obj)
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = generated_name(meta["generateName"])
        if not meta.get("name"):
            raise ApiStatusError(
                422,
                "Invalid",
                f"{rt.kind} is invalid: metadata.name: Required value: name is required",
            )
        if schema is not None and not rt.builtin:
            errors = custom_resource_errors(schema, obj)
            if errors:
                raise invalid_custom_resource(rt.kind, rt.group, meta["name"], errors)
        return obj

    def create(
        self,
        rt: ResourceType,
        namespace: str,
        body: Any,
        *,
        dry_run: bool = False,
        uid: str | None = None,
    ) -> Json:
        """Store a new object; ``uid``: the one validating admission saw (else a new
        one)."""
        obj = self._prepare_new(rt, namespace if rt.namespaced else "", body)
        meta = obj["metadata"]
        validate(rt, obj)
        self._check_namespace(rt, namespace)
        if self.find(rt, namespace, meta["name"]) is not None:
            if meta.get("generateName") and not _asked_name(body):
                # A generated name that is taken: kube-apiserver asks the client to try
                # again rather than answer AlreadyExists for a name it never asked for.
                raise ApiStatusError(
                    500,
                    "ServerTimeout",
                    f"The POST operation against {rt.qualified} could not be completed at "
                    "this time, please try again.",
                    {"name": "POST", "group": rt.group, "kind": rt.plural},
                )
            raise ApiStatusError(
                409,
                "AlreadyExists",
                f'{rt.qualified} "{meta["name"]}" already exists',
                {"name": meta["name"], "group": rt.group, "kind": rt.plural},
            )
        meta["uid"] = uid or str(uuid.uuid4())
        meta["creationTimestamp"] = now_iso()
        if (rt.group, rt.plural) in _NO_GENERATION:
            meta.pop("generation", None)
        else:
            meta["generation"] = 1
        for k in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds"):
            meta.pop(k, None)
        if (rt.group, rt.plural) in _STATUS_CLEARED_ON_CREATE or (
            not rt.builtin and rt.status_subresource
        ):
            obj.pop("status", None)
        self._default(rt, obj)
        if (rt.group, rt.plural) == ("batch", "jobs"):
            validate_job_create(obj, self.versions.kube)
        self._check_gangs(rt, obj, None)
        if dry_run:
            return obj
        self._commit(rt, "ADDED", obj, None)
        # The answer is the object as created, before the server's own controllers (the
        # disruption controller fills a new budget's status) write it again.
        answer = copy_json(obj)
        self._after_write(rt, obj, created=True)
        return answer

    def _check_gangs(self, rt: ResourceType, obj: Json, old: Json | None) -> None:
        """The native gang API's rules (:mod:`.native_gangs`): a pod's reference to its
        group, and the Workload, PodGroup and CompositePodGroup objects."""
        if (rt.group, rt.plural) == ("", "pods"):
            if isinstance(obj.get("spec"), dict):
                drop_disabled_pod_fields(obj["spec"], self.versions)
            check_pod_group_ref(obj, old, self.versions)
        else:
            check_native(rt, obj, old, self.versions)

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
        elif (rt.group, rt.plural) == ("batch", "jobs"):
            default_job(obj, self.versions.kube)
        elif default_workload(rt.group, rt.plural, obj):
            pass
        elif (rt.group, rt.plural) == _CRDS:
            obj.update(crd_defaults(obj))
            validate_crd(obj)
            obj["status"] = crd_status(obj)
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
            new = copy_json(old)
            new["status"] = obj.get("status")
            if new["status"] is None:
                del new["status"]
            return new
        if rt.status_subresource:
            if "status" in old:
                obj["status"] = old["status"]
            else:
                obj.pop("status", None)
        if (rt.group, rt.plural) == ("batch", "jobs"):
            # decoded and defaulted, the disabled fields dropped, then validated against
            # the old object as the server reads it from storage (defaulted too)
            default_job_fields(obj, self.versions.kube)
            stored = copy_json(old)
            default_job_fields(stored, self.versions.kube)
            drop_disabled_job_fields(obj["spec"], self.versions.kube, stored.get("spec"))
            validate_job_update(stored, obj, self.versions.kube)
        if (rt.group, rt.plural) == _CRDS:
            obj.update(crd_defaults(obj))
            validate_crd(obj)
            obj["status"] = crd_status(obj, old)
        if "generation" in meta_old and self._generation_changed(rt, old, obj):
            meta["generation"] = meta_old["generation"] + 1
        validate(rt, obj)
        self._check_gangs(rt, obj, old)
        return obj

    @staticmethod
    def _generation_changed(rt: ResourceType, old: Json, new: Json) -> bool:
        """Whether an update is one metadata.generation counts: a change of spec for the
        built-in kinds; for a custom resource, any change but metadata (and status, when
        it has a status subresource)."""
        if rt.builtin:
            return bool(new.get("spec") != old.get("spec"))
        skip = {"metadata", "status"} if rt.status_subresource else {"metadata"}
        return {k: v for k, v in new.items() if k not in skip} != {
            k: v for k, v in old.items() if k not in skip
        }

    def _write_update(self, rt: ResourceType, old: Json, new: Json, dry_run: bool) -> Json:
        if new == old or dry_run:
            return new  # a no-op write changes nothing, as in the API server
        meta = new["metadata"]
        if self._finished(new):
            # The last finalizer of an object being deleted went: it goes now, one DELETED
            # event carrying the object as this write left it.
            self._commit(rt, "DELETED", new, old)
            self._after_write(rt, new)
            return new
        self._commit(rt, "MODIFIED", new, old)
        self._after_write(rt, new)
        return self.find(rt, meta.get("namespace", ""), meta["name"]) or new

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
        base = copy_json(old)
        body = apply_patch(rt, base, content_type, patch)
        # The patch may name a resourceVersion (a precondition); otherwise it is the current,
        # and a patch is never refused as an unconditional update.
        if isinstance(body, dict) and isinstance(body.get("metadata"), dict):
            body["metadata"].setdefault("resourceVersion", old["metadata"]["resourceVersion"])
        return self._write_update(rt, old, self._updated(rt, old, body, subresource), dry_run)

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
            self._schema_check(rt, obj, "load:")
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
