"""Structural pruning of custom resources (:func:`tests.kubeapi.crds.prune`), as
apiextensions-apiserver prunes on create and update: examples of each rule, invariants
over generated objects, and an old training-operator's CRD without
``runPolicy.suspend``: the patch is answered 200 and nothing changes."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.kubeapi import ApiServer
from tests.kubeapi.crds import prune
from tests.kubeapi.test_admission import Client

Json = dict[str, Any]

SCHEMA: Json = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "properties": {
                "size": {"type": "integer"},
                "items": {
                    "type": "array",
                    "items": {"type": "object", "properties": {"name": {"type": "string"}}},
                },
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "byName": {
                    "type": "object",
                    "additionalProperties": {
                        "type": "object",
                        "properties": {"n": {"type": "integer"}},
                    },
                },
                "free": {
                    "type": "object",
                    "x-kubernetes-preserve-unknown-fields": True,
                    "properties": {"known": {"type": "object", "properties": {}}},
                },
                "template": {"type": "object", "x-kubernetes-embedded-resource": True},
            },
        },
        "status": {"type": "object"},
    },
}


def test_each_rule() -> None:
    obj: Json = {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "w", "labels": {"a": "b"}},
        "spec": {
            "size": 1,
            "colour": "red",
            "items": [{"name": "a", "extra": 1}, {"name": "b"}],
            "labels": {"x": "y"},
            "byName": {"k": {"n": 1, "m": 2}},
            "free": {"anything": {"deep": [1]}, "known": {"dropped": 1}},
            "template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}},
        },
        "status": {"phase": "Running"},
        "top": True,
    }
    pruned = prune(SCHEMA, obj)
    assert pruned == [
        "spec.byName.k.m",
        "spec.colour",
        "spec.free.known.dropped",
        "spec.items[0].extra",
        "spec.template.spec",
        "status.phase",
        "top",
    ]
    assert obj == {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "w", "labels": {"a": "b"}},
        "spec": {
            "size": 1,
            "items": [{"name": "a"}, {"name": "b"}],
            "labels": {"x": "y"},
            "byName": {"k": {"n": 1}},
            "free": {"anything": {"deep": [1]}, "known": {}},
            "template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}},
        },
        "status": {},
    }


def test_no_schema_prunes_nothing() -> None:
    obj: Json = {"spec": {"anything": 1}}
    assert prune(None, obj) == [] and obj == {"spec": {"anything": 1}}


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=3),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(["spec", "size", "items", "name", "free", "x"]), inner, max_size=4
        )
    ),
    max_leaves=12,
)


def _declared(schema: Json | None, x: Any) -> bool:
    """Every field left is declared by the schema (or kept by preserve-unknown)."""
    if schema is None:
        return not isinstance(x, dict) or not x
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return True
    if isinstance(x, dict):
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        return all(
            (k in props and _declared(props[k], v))
            or (isinstance(extra, dict) and _declared(extra, v))
            for k, v in x.items()
        )
    if isinstance(x, list):
        items = schema.get("items")
        return all(_declared(items if isinstance(items, dict) else None, v) for v in x)
    return True


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.sampled_from(["spec", "status", "other"]), _json, max_size=3))
def test_pruning_leaves_only_declared_fields_and_is_idempotent(obj: Json) -> None:
    once = copy.deepcopy(obj)
    prune(SCHEMA, once)
    body = {k: v for k, v in once.items() if k not in ("apiVersion", "kind", "metadata")}
    assert _declared(SCHEMA, body)
    twice = copy.deepcopy(once)
    assert prune(SCHEMA, twice) == [] and twice == once


# An old training-operator PyTorchJob CRD: runPolicy has no suspend (added in v1.5).
OLD_PYTORCHJOB = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "pytorchjobs.kubeflow.org"},
    "spec": {
        "group": "kubeflow.org",
        "scope": "Namespaced",
        "names": {"plural": "pytorchjobs", "kind": "PyTorchJob"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "properties": {
                                    "runPolicy": {
                                        "type": "object",
                                        "properties": {
                                            "cleanPodPolicy": {"type": "string"},
                                            "backoffLimit": {"type": "integer"},
                                        },
                                    },
                                    "pytorchReplicaSpecs": {
                                        "type": "object",
                                        "x-kubernetes-preserve-unknown-fields": True,
                                    },
                                },
                            },
                            "status": {
                                "type": "object",
                                "x-kubernetes-preserve-unknown-fields": True,
                            },
                        },
                    }
                },
            }
        ],
    },
}


async def test_a_patch_of_a_field_the_crd_lacks_is_200_and_changes_nothing(
    api: ApiServer,
) -> None:
    import aiohttp

    async with aiohttp.ClientSession() as s:
        client = Client(api, s)
        status, body, _ = await client.send(
            "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", OLD_PYTORCHJOB
        )
        assert status == 201, body
        path = "/apis/kubeflow.org/v1/namespaces/default/pytorchjobs"
        job = {
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "metadata": {"name": "train"},
            "spec": {
                "runPolicy": {"cleanPodPolicy": "None"},
                "pytorchReplicaSpecs": {"Master": {}},
            },
        }
        status, created, _ = await client.send("POST", path, job)
        assert status == 201, created
        status, patched, warnings = await client.send(
            "PATCH",
            f"{path}/train",
            {"spec": {"runPolicy": {"suspend": True}}},
            "application/merge-patch+json",
        )
        assert status == 200, patched
        assert patched["spec"]["runPolicy"] == {"cleanPodPolicy": "None"}
        assert patched["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
        assert warnings == ['299 - "unknown field \\"spec.runPolicy.suspend\\""']
