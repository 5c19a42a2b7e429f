"""OpenAPI v3, as much of it as kubectl reads: ``/openapi/v3`` (the index of group
versions, each with a ``serverRelativeURL`` carrying a content hash) and
``/openapi/v3/api/v1``, ``/openapi/v3/apis/{group}/{version}``: the paths of each
resource served, their operations marked with ``x-kubernetes-group-version-kind`` and
``x-kubernetes-action``, the ``fieldValidation`` parameter on writes, the patch types each
PATCH accepts, and a schema per kind.

kubectl (v1.28+; read at v1.32: ``staging/src/k8s.io/cli-runtime/pkg/resource/
query_param_verifier_v3.go``) sends ``create -f`` and ``apply -f`` with
``fieldValidation=Strict`` once a group version's document shows a PATCH operation for
the kind with that parameter; for a custom resource whose group version it cannot find
it asks the CRDs and the Namespace document instead. Its ``apply`` computes a strategic
merge patch only for a kind whose PATCH accepts
``application/strategic-merge-patch+json`` (``apply/patcher.go``), a JSON merge patch
otherwise (custom resources).

The schemas are written here from the field lists of :mod:`.fields` (never copied from
Kubernetes' published OpenAPI): a kind's top-level fields and the fields of its spec,
as deep as :mod:`.fields` checks them; a custom resource's schema is its CRD's
``openAPIV3Schema``. ``/openapi/v2`` is not served (404): kubectl needs it only when v3
is missing.
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

from tests.kubeapi.crds import schema_of
from tests.kubeapi.fields import known_fields
from tests.kubeapi.resources import ResourceType, served
from tests.kubeapi.store import ApiStore

Json = dict[str, Any]

__all__ = ["group_version_document", "index_document"]

_META = "io.k8s.apimachinery.pkg.apis.meta.v1"
_PATCH_TYPES_BUILTIN = (
    "application/apply-patch+yaml",
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
)
_PATCH_TYPES_CUSTOM = (
    "application/apply-patch+yaml",
    "application/json-patch+json",
    "application/merge-patch+json",
)


def _gv_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def _group_versions(store: ApiStore) -> list[tuple[str, str]]:
    seen: list[tuple[str, str]] = []
    for rt in store.types.values():
        if served(rt, store.versions) and (rt.group, rt.version) not in seen:
            seen.append((rt.group, rt.version))
    return seen


def index_document(store: ApiStore) -> Json:
    """``/openapi/v3``: every group version served, with the URL of its document."""
    paths: Json = {}
    for group, version in sorted(_group_versions(store)):
        doc = group_version_document(store, group, version)
        digest = hashlib.sha512(orjson.dumps(doc, option=orjson.OPT_SORT_KEYS)).hexdigest()
        path = _gv_path(group, version)
        paths[path] = {"serverRelativeURL": f"/openapi/v3/{path}?hash={digest.upper()[:128]}"}
    return {"paths": paths}


def _schema_name(rt: ResourceType) -> str:
    if not rt.builtin:
        reversed_group = ".".join(reversed(rt.group.split(".")))
        return f"{reversed_group}.{rt.version}.{rt.kind}"
    group = rt.group.split(".")[0] if rt.group else "core"
    return f"io.k8s.api.{group}.{rt.version}.{rt.kind}"


def _gvk(rt: ResourceType) -> Json:
    return {"group": rt.group, "version": rt.version, "kind": rt.kind}


def _param(name: str, description: str) -> Json:
    return {
        "name": name,
        "in": "query",
        "description": description,
        "schema": {"type": "string", "uniqueItems": True},
    }


_DRY_RUN = _param("dryRun", "When present, the modifications are not persisted (All).")
_FIELD_MANAGER = _param("fieldManager", "The name of the actor making the change.")
_FIELD_VALIDATION = _param(
    "fieldValidation",
    "How to treat unknown fields in the body: Ignore, Warn (the default) or Strict.",
)


def _body(rt: ResourceType, types: tuple[str, ...] = ("application/json",)) -> Json:
    ref = {"$ref": f"#/components/schemas/{_schema_name(rt)}"}
    return {"content": {t: {"schema": ref} for t in types}, "required": True}


def _ok(rt: ResourceType) -> Json:
    ref = {"$ref": f"#/components/schemas/{_schema_name(rt)}"}
    return {"200": {"description": "OK", "content": {"application/json": {"schema": ref}}}}


def _operation(rt: ResourceType, action: str, **extra: Any) -> Json:
    op: Json = {
        "description": f"{action} {rt.kind}",
        "operationId": f"{action}{rt.kind}",
        "responses": _ok(rt),
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": _gvk(rt),
    }
    op.update(extra)
    return op


def _paths(rt: ResourceType) -> Json:
    prefix = "/" + _gv_path(rt.group, rt.version)
    collection = (
        f"{prefix}/namespaces/{{namespace}}/{rt.plural}"
        if rt.namespaced
        else f"{prefix}/{rt.plural}"
    )
    writes = [_DRY_RUN, _FIELD_MANAGER, _FIELD_VALIDATION]
    patch_types = _PATCH_TYPES_BUILTIN if rt.builtin else _PATCH_TYPES_CUSTOM
    item = {
        "get": _operation(rt, "get"),
        "put": _operation(rt, "put", parameters=writes, requestBody=_body(rt)),
        "patch": _operation(
            rt,
            "patch",
            parameters=[*writes, _param("force", "Force an apply patch.")],
            requestBody=_body(rt, patch_types),
        ),
        "delete": _operation(rt, "delete", parameters=[_DRY_RUN]),
    }
    out: Json = {
        collection: {
            "get": _operation(rt, "list"),
            "post": _operation(rt, "post", parameters=writes, requestBody=_body(rt)),
        },
        f"{collection}/{{name}}": item,
    }
    if rt.namespaced:
        out[f"{prefix}/{rt.plural}"] = {"get": _operation(rt, "list")}
    if rt.status_subresource:
        out[f"{collection}/{{name}}/status"] = {
            "get": _operation(rt, "get"),
            "put": _operation(rt, "put", parameters=writes, requestBody=_body(rt)),
        }
    return out


_OBJECT_META: Json = {
    "type": "object",
    "description": "Standard object's metadata.",
    "properties": {
        "name": {"type": "string"},
        "generateName": {"type": "string"},
        "namespace": {"type": "string"},
        "uid": {"type": "string"},
        "resourceVersion": {"type": "string"},
        "generation": {"type": "integer", "format": "int64"},
        "creationTimestamp": {"type": "string", "format": "date-time"},
        "deletionTimestamp": {"type": "string", "format": "date-time"},
        "deletionGracePeriodSeconds": {"type": "integer", "format": "int64"},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
        "ownerReferences": {
            "type": "array",
            "items": {"type": "object"},
            "x-kubernetes-patch-merge-key": "uid",
            "x-kubernetes-patch-strategy": "merge",
        },
        "finalizers": {
            "type": "array",
            "items": {"type": "string"},
            "x-kubernetes-patch-strategy": "merge",
        },
        "managedFields": {"type": "array", "items": {"type": "object"}},
    },
}


def _ref(name: str) -> Json:
    """A field of a named schema, written as Kubernetes' documents write one."""
    return {"allOf": [{"$ref": f"#/components/schemas/{name}"}], "default": {}}


def _builtin_schema(store: ApiStore, rt: ResourceType) -> tuple[Json, Json]:
    """The kind's schema, and the schema of its spec where its fields are listed."""
    top, spec_fields = known_fields(rt, store.versions.kube)
    props: Json = {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "metadata": _ref(f"{_META}.ObjectMeta"),
    }
    extra: Json = {}
    for name in top:
        if name in props:
            continue
        props[name] = {"description": f"{rt.kind}.{name}"}
    if spec_fields:
        spec_name = f"{_schema_name(rt)}Spec"
        props["spec"] = _ref(spec_name)
        extra[spec_name] = {
            "type": "object",
            "description": f"The spec of a {rt.kind}.",
            "properties": {f: {"description": f"{rt.kind}.spec.{f}"} for f in spec_fields},
        }
    # No x-kubernetes-group-version-kind: kubectl would compute strategic merge patches
    # from these schemas, which are not deep enough for that; without it, it uses the
    # kinds compiled into it, as with a server that publishes no schema for a kind.
    schema = {
        "type": "object",
        "description": f"{rt.kind} ({rt.api_version}).",
        "properties": props,
    }
    return schema, extra


def _custom_schema(store: ApiStore, rt: ResourceType) -> Json:
    crds = store.types.get(("apiextensions.k8s.io", "v1", "customresourcedefinitions"))
    crd = store.find(crds, "", rt.qualified) if crds is not None else None
    schema = dict(schema_of(crd, rt.version) or {}) if crd is not None else {}
    if not schema:
        schema = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    props = dict(schema.get("properties") or {})
    props.setdefault("apiVersion", {"type": "string"})
    props.setdefault("kind", {"type": "string"})
    props["metadata"] = _ref(f"{_META}.ObjectMeta")
    schema["properties"] = props
    schema["x-kubernetes-group-version-kind"] = [_gvk(rt)]
    return schema


def group_version_document(store: ApiStore, group: str, version: str) -> Json | None:
    """``/openapi/v3/api/v1`` or ``/openapi/v3/apis/{group}/{version}`` (None: not
    served)."""
    types = [
        rt
        for rt in store.types.values()
        if (rt.group, rt.version) == (group, version) and served(rt, store.versions)
    ]
    if not types:
        return None
    paths: Json = {}
    schemas: Json = {f"{_META}.ObjectMeta": _OBJECT_META}
    for rt in sorted(types, key=lambda t: t.plural):
        paths.update(_paths(rt))
        if rt.builtin:
            schema, extra = _builtin_schema(store, rt)
            schemas.update(extra)
        else:
            schema = _custom_schema(store, rt)
        schemas[_schema_name(rt)] = schema
    kube = store.versions.kube
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": f"v{kube.major}.{kube.minor}.0"},
        "paths": paths,
        "components": {"schemas": schemas},
    }
