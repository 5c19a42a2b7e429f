"""Writes through the admission chain: what the HTTP handlers (and models that write as
a client would) call instead of the store's write methods.

The API server's order for a write is: decode and default, mutating admission, then
name generation, uid, timestamps, validation and storage. The store does all but the
admission in one step, so each write here asks the store for the object it would
write (a dry run), takes back what the API server has not filled in yet at admission
(no uid, ``creationTimestamp: null``, no generated name, the old generation on
update), runs the chain on it, and writes the result. A dry run the store refuses as
invalid (422) or as already existing (409) still goes to the webhooks, as those errors
come after admission in the API server.

An update whose object changed while the webhooks were called is tried again from the
start (a PATCH, or a PUT without a resourceVersion), as the API server's update loop
does; a PUT with a resourceVersion gets its 409.
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable
from typing import Any

import jsonpatch
import jsonpointer

from tests.kubeapi.patches import merge_patch
from tests.kubeapi.resources import ResourceType
from tests.kubeapi.status import ApiStatusError
from tests.kubeapi.store import ApiStore
from tests.kubeapi.webhooks import (
    ADMIN,
    AdmissionChain,
    Attributes,
    default_configuration,
    validate_configuration,
)

Json = dict[str, Any]

__all__ = ["AdmittedWrites", "Validator"]

_RETRIES = 5
_MWC = ("admissionregistration.k8s.io", "mutatingwebhookconfigurations")
_VWC = ("admissionregistration.k8s.io", "validatingwebhookconfigurations")
# the webhook configurations the API server defaults and validates itself, by kind
_CONFIGS = {_MWC: "MutatingWebhookConfiguration", _VWC: "ValidatingWebhookConfiguration"}

# An in-process validating admission step (a model of a validating webhook or plugin):
# called with the request's attributes (``object``: what would be stored) and the object
# it judges (the stored one for DELETE); it refuses by raising ApiStatusError.
Validator = Callable[[Attributes, Json], Awaitable[None]]


def _configuration(rt: ResourceType, obj: Json, old: Json | None = None) -> Json:
    """A webhook configuration defaulted and checked as the API server stores it."""
    mutating = (rt.group, rt.plural) == _MWC
    out = default_configuration(obj, mutating=mutating)
    validate_configuration(
        out,
        default_configuration(old, mutating=mutating) if old is not None else None,
        kind=_CONFIGS[(rt.group, rt.plural)],
    )
    return out


def _with_name(body: Json, final: Json) -> Json:
    """The body to store, named as the validated object was (a generated name)."""
    name = final.get("metadata", {}).get("name")
    meta = body.get("metadata") if isinstance(body.get("metadata"), dict) else {}
    if not name or meta.get("name") == name:
        return body
    out = copy.deepcopy(body)
    out.setdefault("metadata", {})["name"] = name
    return out


def _options(kind: str, dry_run: bool, extra: Json | None = None) -> Json:
    out: Json = {"kind": kind, "apiVersion": "meta.k8s.io/v1"}
    if extra:
        out.update(extra)
    if dry_run:
        out["dryRun"] = ["All"]
    return out


def _kind(rt: ResourceType) -> tuple[str, str, str]:
    return (rt.group, rt.version, rt.kind)


def _raw(rt: ResourceType, namespace: str, body: Any) -> Json:
    """The body as decoded, when the store would refuse it only after admission."""
    obj: Json = copy.deepcopy(body)
    obj["kind"], obj["apiVersion"] = rt.kind, rt.api_version
    meta = obj.setdefault("metadata", {})
    if rt.namespaced:
        meta["namespace"] = namespace
    return obj


# The labels a Job's generated selector brings, added after admission (PrepareForCreate).
_JOB_LABELS = (
    "batch.kubernetes.io/controller-uid",
    "batch.kubernetes.io/job-name",
    "controller-uid",
    "job-name",
)


def _labels(obj: Any, *path: str) -> dict[str, Any] | None:
    for key in path:
        obj = obj.get(key) if isinstance(obj, dict) else None
    return obj if isinstance(obj, dict) else None


def _admission_view(rt: ResourceType, body: Json, obj: Json) -> Json:
    """What the store made of a new object, less what the API server adds only after
    mutating admission: a pod's starting status (phase, qosClass), a Job's generated
    selector and its labels. Defaults and the in-tree admission plugins' additions
    (service account volume, tolerations, priority) stay: they come before."""
    view: Json = copy.deepcopy(obj)
    if (rt.group, rt.plural) == ("", "pods"):
        view["status"] = copy.deepcopy(body.get("status") or {})
    elif (rt.group, rt.plural) == ("batch", "jobs"):
        bspec = body.get("spec") if isinstance(body.get("spec"), dict) else {}
        spec = view.get("spec") if isinstance(view.get("spec"), dict) else {}
        if not bspec.get("selector"):
            spec.pop("selector", None)
        for path in (("spec", "template", "metadata", "labels"), ("metadata", "labels")):
            given = _labels(body, *path) or {}
            labels = _labels(view, *path)
            if labels is None:
                continue
            for k in _JOB_LABELS:
                if k not in given:
                    labels.pop(k, None)
        if _labels(view, "metadata", "labels") == {}:
            view["metadata"].pop("labels")
    return view


def _for_store(rt: ResourceType, body: Json, view: Json, admitted: Json) -> Json:
    """The admitted object for the store: a Job's labels the server copied from its
    template are copied again (with the generated ones) unless a webhook changed them."""
    if (
        (rt.group, rt.plural) == ("batch", "jobs")
        and not _labels(body, "metadata", "labels")
        and _labels(admitted, "metadata", "labels") == _labels(view, "metadata", "labels")
    ):
        admitted = copy.deepcopy(admitted)
        admitted["metadata"].pop("labels", None)
    return admitted


class AdmittedWrites:
    """The store's write methods, async, with admission in front: mutating webhooks,
    then (on the object as it would be stored) the validating phase -- the
    ValidatingWebhookConfigurations' webhooks and the in-process :attr:`validators`,
    any of which refuses the write. Each takes ``warnings`` (filled with what webhooks
    said) and ``user`` (the userInfo of the review; the recordings' admin by default)."""

    def __init__(self, store: ApiStore, chain: AdmissionChain | None = None) -> None:
        self.store = store
        self.chain = chain or AdmissionChain(store)
        self.validators: list[Validator] = []

    def _validating(self) -> bool:
        return bool(self.validators) or self.chain.active(_VWC[1])

    def _active(self) -> bool:
        return self.chain.active() or self._validating()

    async def _validate(self, a: Attributes, obj: Json, warnings: list[str] | None) -> None:
        """The validating admission phase: webhooks (all called), then the validators."""
        await self.chain.validate(a, warnings if warnings is not None else [])
        for validator in list(self.validators):
            await validator(a, obj)

    # --- CREATE ---------------------------------------------------------------------

    async def create(
        self,
        rt: ResourceType,
        namespace: str,
        body: Any,
        *,
        dry_run: bool = False,
        warnings: list[str] | None = None,
        user: Json | None = None,
        options: Json | None = None,
    ) -> Json:
        store = self.store
        ns = namespace if rt.namespaced else ""
        if (rt.group, rt.plural) in _CONFIGS and isinstance(body, dict):
            body = _configuration(rt, body)
        if not self._active() or not isinstance(body, dict):
            return store.create(rt, ns, body, dry_run=dry_run)
        if self.chain.active():
            body = await self._mutate_new(rt, ns, body, dry_run, warnings, user, options)
        uid: str | None = None
        if self._validating():
            try:
                final = store.create(rt, ns, body, dry_run=True)
            except ApiStatusError as e:
                if e.code != 409:
                    raise
                # AlreadyExists comes from storage, after admission; the write says it
            else:
                final.get("metadata", {}).pop("resourceVersion", None)
                attrs = Attributes(
                    "CREATE",
                    rt,
                    "",
                    ns,
                    final["metadata"].get("name", ""),
                    final,
                    None,
                    dry_run,
                    _options("CreateOptions", dry_run, options),
                    user or ADMIN,
                    _kind(rt),
                )
                await self._validate(attrs, final, warnings)
                body = _with_name(body, final)
                uid = final["metadata"].get("uid")
        return store.create(rt, ns, body, dry_run=dry_run, uid=uid)

    async def _mutate_new(
        self,
        rt: ResourceType,
        ns: str,
        body: Json,
        dry_run: bool,
        warnings: list[str] | None,
        user: Json | None,
        options: Json | None,
    ) -> Json:
        """The body of a CREATE after the mutating webhooks."""
        store = self.store
        named = (
            bool((body.get("metadata") or {}).get("name"))
            if isinstance(body.get("metadata"), dict)
            else False
        )
        try:
            obj = store.create(rt, ns, body, dry_run=True)
        except ApiStatusError as e:
            if e.code not in (409, 422):
                raise
            obj = _raw(rt, ns, body)
        obj = _admission_view(rt, body, obj)
        meta = obj["metadata"]
        for k in ("uid", "resourceVersion", "generation", "creationTimestamp"):
            meta.pop(k, None)
        if rt.builtin:
            meta["creationTimestamp"] = None
        if not named:
            meta.pop("name", None)
        attrs = Attributes(
            "CREATE",
            rt,
            "",
            ns,
            meta.get("name", ""),
            obj,
            None,
            dry_run,
            _options("CreateOptions", dry_run, options),
            user or ADMIN,
            _kind(rt),
        )
        admitted = await self.chain.admit(attrs, warnings if warnings is not None else [])
        assert admitted is not None
        return _for_store(rt, body, obj, admitted)

    # --- UPDATE ---------------------------------------------------------------------

    async def replace(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        body: Any,
        *,
        subresource: str = "",
        dry_run: bool = False,
        warnings: list[str] | None = None,
        user: Json | None = None,
    ) -> Json:
        if not self._active() and (rt.group, rt.plural) not in _CONFIGS:
            return self.store.replace(
                rt, namespace, name, body, subresource=subresource, dry_run=dry_run
            )
        unconditional = not (
            isinstance(body, dict)
            and isinstance(body.get("metadata"), dict)
            and body["metadata"].get("resourceVersion")
        )

        def compute(old: Json) -> Json:
            return self.store.replace(
                rt, namespace, name, body, subresource=subresource, dry_run=True
            )

        def fallback(old: Json) -> Json:
            return _raw(rt, old["metadata"].get("namespace", ""), body)

        return await self._update(
            rt,
            namespace,
            name,
            subresource,
            dry_run,
            warnings,
            user,
            compute,
            fallback,
            retry=unconditional,
        )

    async def patch(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        content_type: str,
        patch: Any,
        *,
        subresource: str = "",
        dry_run: bool = False,
        warnings: list[str] | None = None,
        user: Json | None = None,
    ) -> Json:
        if not self._active() and (rt.group, rt.plural) not in _CONFIGS:
            return self.store.patch(
                rt, namespace, name, content_type, patch, subresource=subresource, dry_run=dry_run
            )

        def compute(old: Json) -> Json:
            return self.store.patch(
                rt, namespace, name, content_type, patch, subresource=subresource, dry_run=True
            )

        def fallback(old: Json) -> Json:
            base = copy.deepcopy(old)
            if content_type == "application/json-patch+json":
                try:
                    out = jsonpatch.JsonPatch(patch).apply(base)
                except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException):
                    raise _NoFallback() from None
            else:
                out = merge_patch(base, patch)
            if not isinstance(out, dict):
                raise _NoFallback()
            return out

        return await self._update(
            rt,
            namespace,
            name,
            subresource,
            dry_run,
            warnings,
            user,
            compute,
            fallback,
            retry=True,
        )

    async def _update(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        subresource: str,
        dry_run: bool,
        warnings: list[str] | None,
        user: Json | None,
        compute: Any,
        fallback: Any,
        *,
        retry: bool,
    ) -> Json:
        store = self.store
        ns = namespace if rt.namespaced else ""
        is_config = (rt.group, rt.plural) in _CONFIGS
        for attempt in range(_RETRIES):
            old = store.get(rt, ns, name)
            try:
                new = copy.deepcopy(compute(old))
            except ApiStatusError as e:
                if e.code != 422:
                    raise
                try:
                    new = fallback(old)
                except _NoFallback:
                    raise e from None
            if is_config:
                new = _configuration(rt, new, old)
            # Admission sees the stored generation: the bump (kinds that have one) is later.
            if "generation" in old["metadata"]:
                new["metadata"]["generation"] = old["metadata"]["generation"]
            else:
                new["metadata"].pop("generation", None)
            attrs = Attributes(
                "UPDATE",
                rt,
                subresource,
                ns,
                name,
                new,
                old,
                dry_run,
                _options("UpdateOptions", dry_run),
                user or ADMIN,
                _kind(rt),
            )
            admitted = await self.chain.admit(attrs, warnings if warnings is not None else [])
            assert admitted is not None
            if self._validating():
                final = store.replace(rt, ns, name, admitted, subresource=subresource, dry_run=True)
                attrs = Attributes(
                    "UPDATE",
                    rt,
                    subresource,
                    ns,
                    name,
                    final,
                    old,
                    dry_run,
                    _options("UpdateOptions", dry_run),
                    user or ADMIN,
                    _kind(rt),
                )
                await self._validate(attrs, final, warnings)
            current = store.get(rt, ns, name)
            moved = current["metadata"]["resourceVersion"] != old["metadata"]["resourceVersion"]
            if moved and retry and attempt + 1 < _RETRIES:
                continue  # changed during the calls: start again from the new object
            return store.replace(rt, ns, name, admitted, subresource=subresource, dry_run=dry_run)
        raise AssertionError("unreachable")

    # --- DELETE and eviction ----------------------------------------------------------

    async def delete(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        *,
        uid: str | None = None,
        resource_version: str | None = None,
        dry_run: bool = False,
        warnings: list[str] | None = None,
        user: Json | None = None,
        options: Json | None = None,
        grace_period_seconds: int | None = None,
        propagation_policy: str | None = None,
    ) -> Json:
        store = self.store
        ns = namespace if rt.namespaced else ""
        if self._active():
            old = store.get(rt, ns, name)
            options = dict(options or {})
            if grace_period_seconds is not None:
                options.setdefault("gracePeriodSeconds", grace_period_seconds)
            if propagation_policy is not None:
                options.setdefault("propagationPolicy", propagation_policy)
            attrs = Attributes(
                "DELETE",
                rt,
                "",
                ns,
                name,
                None,
                old,
                dry_run,
                _options("DeleteOptions", dry_run, options),
                user or ADMIN,
                _kind(rt),
            )
            await self.chain.admit(attrs, warnings if warnings is not None else [])
            if self._validating():
                await self._validate(attrs, old, warnings)
        return store.delete(
            rt,
            ns,
            name,
            uid=uid,
            resource_version=resource_version,
            dry_run=dry_run,
            grace_period_seconds=grace_period_seconds,
            propagation_policy=propagation_policy,
        )

    async def evict(
        self,
        namespace: str,
        name: str,
        body: Any,
        *,
        dry_run: bool = False,
        warnings: list[str] | None = None,
        user: Json | None = None,
    ) -> Json:
        """POST pods/NAME/eviction: a CREATE of the subresource (kind policy/v1
        Eviction); webhooks that name ``pods/eviction`` see it, those on ``pods`` do not."""
        store = self.store
        if self._active() and isinstance(body, dict):
            pods = store.resource("pods")
            store.get(pods, namespace, name)  # 404 before admission, as the API server
            obj = copy.deepcopy(body)
            meta = obj.setdefault("metadata", {})
            if isinstance(meta, dict):
                meta.setdefault("namespace", namespace)
                meta.setdefault("creationTimestamp", None)
            attrs = Attributes(
                "CREATE",
                pods,
                "eviction",
                namespace,
                name,
                obj,
                None,
                dry_run,
                _options("CreateOptions", dry_run),
                user or ADMIN,
                ("policy", "v1", "Eviction"),
            )
            admitted = await self.chain.admit(attrs, warnings if warnings is not None else [])
            if admitted is not None:
                body = admitted
            if self._validating():
                validated = Attributes(
                    "CREATE",
                    pods,
                    "eviction",
                    namespace,
                    name,
                    body,
                    None,
                    dry_run,
                    _options("CreateOptions", dry_run),
                    user or ADMIN,
                    ("policy", "v1", "Eviction"),
                )
                await self._validate(validated, body, warnings)
        return store.evict(namespace, name, body, dry_run=dry_run)


class _NoFallback(Exception):
    """The request cannot even be applied: its own error stands, no webhook is called."""
