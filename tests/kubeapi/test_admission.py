"""The in-memory API server's mutating admission chain, over real HTTPS to webhooks the
tests run: what is sent, to whom, and what the client gets back, as kube-apiserver
v1.28 does it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import orjson
import pytest

from tests.builders.capture_webhook import CaptureWebhook, allow, patch_response
from tests.kubeapi import ApiServer
from tests.kubeapi import objects as o

Json = dict[str, Any]
NS = "ml"
MWC_PATH = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"


def hook(
    url: str,
    ca: str,
    *,
    name: str = "capture.test.corral.dev",
    rules: list[Json] | None = None,
    **extra: Any,
) -> Json:
    return {
        "name": name,
        "admissionReviewVersions": ["v1"],
        "sideEffects": "None",
        "clientConfig": {"url": url, "caBundle": ca},
        "rules": rules
        if rules is not None
        else [
            {
                "apiGroups": [""],
                "apiVersions": ["v1"],
                "operations": ["CREATE", "UPDATE"],
                "resources": ["pods"],
            }
        ],
        **extra,
    }


def config(name: str, *hooks: Json) -> Json:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": list(hooks),
    }


class Client:
    """Raw HTTP to the fake, to see status codes and headers as kubectl does."""

    def __init__(self, api: ApiServer, session: aiohttp.ClientSession) -> None:
        self.api, self.session = api, session

    async def send(
        self, method: str, path: str, body: Any = None, ctype: str = "application/json"
    ) -> tuple[int, Any, list[str]]:
        data = None if body is None else orjson.dumps(body)
        async with self.session.request(
            method, self.api.url + path, data=data, headers={"Content-Type": ctype}
        ) as r:
            return r.status, await r.json(content_type=None), r.headers.getall("Warning", [])

    async def register(self, *hooks: Json, name: str = "capture") -> None:
        status, body, _ = await self.send("POST", MWC_PATH, config(name, *hooks))
        assert status == 201, body

    async def create_pod(self, pod: Json, query: str = "") -> tuple[int, Any, list[str]]:
        return await self.send("POST", f"/api/v1/namespaces/{NS}/pods{query}", pod)


@pytest.fixture
async def client(api: ApiServer) -> AsyncIterator[Client]:
    api.store.create(api.store.resource("namespaces"), "", o.namespace(NS, {"team": "a"}))
    api.store.create(api.store.resource("namespaces"), "", o.namespace("other"))
    async with aiohttp.ClientSession() as s:
        yield Client(api, s)


@pytest.fixture
async def capture() -> AsyncIterator[CaptureWebhook]:
    async with CaptureWebhook() as h:
        yield h


def plain_pod(name: str = "p", **labels: str) -> Json:
    pod = o.pod(name, NS, labels={"app": name, **labels})
    pod.pop("status", None)
    return pod


async def test_a_patch_is_applied_and_the_review_has_the_real_shape(
    api: ApiServer, client: Client, capture: CaptureWebhook
) -> None:
    capture.answer = lambda req: patch_response(
        req,
        [
            {"op": "replace", "path": "/spec/schedulerName", "value": "volcano"},
            {"op": "add", "path": "/metadata/annotations", "value": {"a": "b"}},
        ],
    )
    await client.register(hook(capture.url, capture.ca_bundle, timeoutSeconds=5))
    pod = plain_pod()
    del pod["metadata"]["name"]
    pod["metadata"]["generateName"] = "w-"
    status, body, _ = await client.create_pod(pod)
    assert status == 201, body
    assert body["spec"]["schedulerName"] == "volcano"
    assert body["metadata"]["annotations"] == {"a": "b"}
    assert body["metadata"]["name"].startswith("w-")
    stored = api.store.get(api.store.resource("pods"), NS, body["metadata"]["name"])
    assert stored["spec"]["schedulerName"] == "volcano"
    [review] = capture.reviews
    assert capture.queries == ["timeout=5s"]
    req = review["request"]
    assert review["apiVersion"] == "admission.k8s.io/v1" and review["kind"] == "AdmissionReview"
    assert list(req) == [
        "uid", "kind", "resource", "requestKind", "requestResource", "namespace",
        "operation", "userInfo", "object", "oldObject", "dryRun", "options",
    ]  # fmt: skip
    assert req["kind"] == {"group": "", "version": "v1", "kind": "Pod"}
    assert req["resource"] == {"group": "", "version": "v1", "resource": "pods"}
    assert req["userInfo"] == {
        "username": "admin",
        "groups": ["system:masters", "system:authenticated"],
    }
    assert req["options"] == {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}
    assert req["oldObject"] is None and req["dryRun"] is False
    meta = req["object"]["metadata"]
    # defaulted, not yet named or stamped
    assert "name" not in meta and meta["generateName"] == "w-" and "uid" not in meta
    assert meta["creationTimestamp"] is None
    assert req["object"]["spec"]["schedulerName"] == "default-scheduler"


async def test_update_sends_the_old_object_and_update_options(
    api: ApiServer, client: Client, capture: CaptureWebhook
) -> None:
    await client.register(hook(capture.url, capture.ca_bundle))
    status, created, _ = await client.create_pod(plain_pod())
    status, patched, _ = await client.send(
        "PATCH",
        f"/api/v1/namespaces/{NS}/pods/p",
        {"metadata": {"labels": {"touched": "yes"}}},
        "application/strategic-merge-patch+json",
    )
    assert status == 200 and patched["metadata"]["labels"]["touched"] == "yes"
    req = capture.reviews[1]["request"]
    assert req["operation"] == "UPDATE" and req["name"] == "p"
    assert req["options"] == {"kind": "UpdateOptions", "apiVersion": "meta.k8s.io/v1"}
    assert req["oldObject"]["metadata"]["labels"] == {"app": "p"}
    assert req["object"]["metadata"]["labels"] == {"app": "p", "touched": "yes"}
    assert req["object"]["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    assert req["object"]["metadata"]["uid"] == created["metadata"]["uid"]


async def test_which_requests_a_webhook_gets(
    api: ApiServer, client: Client, capture: CaptureWebhook
) -> None:
    await client.register(
        hook(
            capture.url,
            capture.ca_bundle,
            namespaceSelector={"matchLabels": {"team": "a"}},
            objectSelector={
                "matchExpressions": [{"key": "skip", "operator": "NotIn", "values": ["yes"]}]
            },
            rules=[
                {
                    "apiGroups": [""],
                    "apiVersions": ["v1"],
                    "operations": ["CREATE"],
                    "resources": ["pods"],
                    "scope": "Namespaced",
                }
            ],
        )
    )
    await client.create_pod(plain_pod("a"))
    await client.create_pod(plain_pod("b", skip="yes"))  # objectSelector
    pod = plain_pod("c")
    pod["metadata"]["namespace"] = "other"
    await client.send("POST", "/api/v1/namespaces/other/pods", pod)  # namespaceSelector
    await client.send(  # UPDATE is not in the rule
        "PATCH",
        f"/api/v1/namespaces/{NS}/pods/a",
        {"metadata": {"labels": {"x": "y"}}},
        "application/merge-patch+json",
    )
    await client.send(  # a subresource is not "pods"
        "PATCH",
        f"/api/v1/namespaces/{NS}/pods/a/status",
        {"status": {"phase": "Running"}},
        "application/merge-patch+json",
    )
    status, _, _ = await client.send(  # nor is an eviction
        "POST",
        f"/api/v1/namespaces/{NS}/pods/a/eviction",
        {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "a"}},
    )
    assert status == 201
    assert [r["request"]["object"]["metadata"]["name"] for r in capture.reviews] == ["a"]


async def test_subresource_rules_and_the_eviction_review(
    api: ApiServer, client: Client, capture: CaptureWebhook
) -> None:
    await client.register(
        hook(
            capture.url,
            capture.ca_bundle,
            rules=[
                {
                    "apiGroups": [""],
                    "apiVersions": ["v1"],
                    "operations": ["CREATE"],
                    "resources": ["pods/eviction"],
                },
                {
                    "apiGroups": ["*"],
                    "apiVersions": ["*"],
                    "operations": ["UPDATE"],
                    "resources": ["*/status"],
                },
            ],
        )
    )
    api.store.create(api.store.resource("pods"), NS, o.pod("e", NS, node="n1"))
    await client.send(
        "PATCH",
        f"/api/v1/namespaces/{NS}/pods/e/status",
        {"status": {"phase": "Running"}},
        "application/merge-patch+json",
    )
    status, body, _ = await client.send(
        "POST",
        f"/api/v1/namespaces/{NS}/pods/e/eviction",
        {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "e"}},
    )
    assert status == 201, body
    status_review, eviction = (r["request"] for r in capture.reviews)
    assert status_review["subResource"] == "status" and status_review["operation"] == "UPDATE"
    assert eviction["kind"] == {"group": "policy", "version": "v1", "kind": "Eviction"}
    assert eviction["resource"] == {"group": "", "version": "v1", "resource": "pods"}
    assert eviction["subResource"] == eviction["requestSubResource"] == "eviction"
    assert eviction["name"] == "e" and eviction["operation"] == "CREATE"
    assert eviction["object"] == {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": "e", "namespace": NS, "creationTimestamp": None},
    }


async def test_a_denial_and_warnings_reach_the_client(
    api: ApiServer, client: Client, capture: CaptureWebhook
) -> None:
    def answer(req: Json) -> Json:
        if req["object"]["metadata"].get("labels", {}).get("bad"):
            return {
                "uid": req["uid"],
                "allowed": False,
                "warnings": ["first", 'say "no"'],
                "status": {"code": 403, "reason": "Forbidden", "message": "no bad pods"},
            }
        return {"uid": req["uid"], "allowed": True, "warnings": ["gang waits"]}

    capture.answer = answer
    await client.register(hook(capture.url, capture.ca_bundle))
    status, body, warnings = await client.create_pod(plain_pod("ok"))
    assert status == 201 and warnings == ['299 - "gang waits"']
    status, body, warnings = await client.create_pod(plain_pod("no", bad="1"))
    assert status == 403
    assert body["message"] == (
        'admission webhook "capture.test.corral.dev" denied the request: no bad pods'
    )
    assert body["reason"] == "Forbidden" and body["code"] == 403
    assert warnings == ['299 - "first"', '299 - "say \\"no\\""']
    assert api.store.find(api.store.resource("pods"), NS, "no") is None
    # no status at all: 400, "without explanation"
    capture.answer = lambda req: {"uid": req["uid"], "allowed": False}
    status, body, _ = await client.create_pod(plain_pod("quiet"))
    assert status == 400 and "reason" not in body
    assert body["message"] == (
        'admission webhook "capture.test.corral.dev" denied the request without explanation'
    )


async def test_failure_policy_on_a_webhook_that_cannot_be_reached(
    api: ApiServer, client: Client, capture: CaptureWebhook
) -> None:
    dead = f"https://127.0.0.1:{capture.port}/mutate"
    await capture.__aexit__()
    await client.register(hook(dead, capture.ca_bundle, failurePolicy="Fail"))
    status, body, _ = await client.create_pod(plain_pod("a"))
    assert status == 500 and body["reason"] == "InternalError"
    assert body["message"] == (
        'Internal error occurred: failed calling webhook "capture.test.corral.dev": failed to '
        f'call webhook: Post "{dead}?timeout=10s": dial tcp 127.0.0.1:{capture.port}: connect: '
        "connection refused"
    )
    assert api.store.find(api.store.resource("pods"), NS, "a") is None
    status, body, _ = await client.send(
        "PATCH",
        f"{MWC_PATH}/capture",
        [{"op": "replace", "path": "/webhooks/0/failurePolicy", "value": "Ignore"}],
        "application/json-patch+json",
    )
    assert status == 200 and body["webhooks"][0]["failurePolicy"] == "Ignore"
    status, body, _ = await client.create_pod(plain_pod("a"))
    assert status == 201 and body["spec"]["schedulerName"] == "default-scheduler"


async def test_timeout_and_bad_certificate(
    api: ApiServer, client: Client, capture: CaptureWebhook
) -> None:
    async def slow(req: Json) -> Json:
        await asyncio.sleep(1.5)
        return allow(req)

    capture.answer = slow
    await client.register(hook(capture.url, capture.ca_bundle, timeoutSeconds=1))
    status, body, _ = await client.create_pod(plain_pod("slow"))
    assert status == 500
    assert body["message"].endswith(
        f'failed to call webhook: Post "{capture.url}?timeout=1s": context deadline exceeded'
    )
    capture.answer = allow
    async with CaptureWebhook() as stranger:  # another CA
        await client.send("DELETE", f"{MWC_PATH}/capture")
        await client.register(hook(capture.url, stranger.ca_bundle))
        status, body, _ = await client.create_pod(plain_pod("tls"))
    assert status == 500
    assert "tls: failed to verify certificate: x509:" in body["message"]
    assert "certificate verify failed" in body["message"]


async def test_a_bad_response_fails_like_a_failed_call(
    api: ApiServer, client: Client, capture: CaptureWebhook
) -> None:
    capture.answer = lambda req: {"uid": "not-" + req["uid"], "allowed": True}
    await client.register(hook(capture.url, capture.ca_bundle))
    status, body, _ = await client.create_pod(plain_pod("x"))
    assert status == 500
    assert "received invalid webhook response: expected response.uid=" in body["message"]
    # a patch that does not apply is an error whatever the failurePolicy
    capture.answer = lambda req: patch_response(
        req, [{"op": "replace", "path": "/spec/nope/deeper", "value": 1}]
    )
    await client.send(
        "PATCH",
        f"{MWC_PATH}/capture",
        [{"op": "replace", "path": "/webhooks/0/failurePolicy", "value": "Ignore"}],
        "application/json-patch+json",
    )
    status, body, _ = await client.create_pod(plain_pod("y"))
    assert status == 500 and body["message"].startswith("Internal error occurred: ")


async def test_dry_run(api: ApiServer, client: Client, capture: CaptureWebhook) -> None:
    capture.answer = lambda req: patch_response(
        req, [{"op": "add", "path": "/metadata/labels/seen", "value": "yes"}]
    )
    await client.register(hook(capture.url, capture.ca_bundle, sideEffects="NoneOnDryRun"))
    status, body, _ = await client.create_pod(plain_pod("d"), "?dryRun=All")
    assert status == 201 and body["metadata"]["labels"] == {"app": "d", "seen": "yes"}
    assert api.store.find(api.store.resource("pods"), NS, "d") is None
    req = capture.reviews[0]["request"]
    assert req["dryRun"] is True
    assert req["options"] == {
        "kind": "CreateOptions",
        "apiVersion": "meta.k8s.io/v1",
        "dryRun": ["All"],
    }
    # v1 refuses any other sideEffects at registration ...
    bad = hook(capture.url, capture.ca_bundle, name="some.test.corral.dev", sideEffects="Some")
    status, body, _ = await client.send("POST", MWC_PATH, config("some", bad))
    assert status == 422
    assert body["message"] == (
        'MutatingWebhookConfiguration.admissionregistration.k8s.io "some" is invalid: '
        'webhooks[0].sideEffects: Unsupported value: "Some": supported values: "None", '
        '"NoneOnDryRun"'
    )
    # ... so only a configuration stored behind its back (v1beta1 days) meets the rule
    api.store.load([config("some", bad)])
    status, body, _ = await client.create_pod(plain_pod("d2"), "?dryRun=All")
    assert status == 400 and body["reason"] == "BadRequest"
    assert body["message"] == 'admission webhook "some.test.corral.dev" does not support dry run'
    status, body, _ = await client.create_pod(plain_pod("d3"))
    assert status == 201


async def test_reinvocation_if_needed(api: ApiServer, client: Client) -> None:
    calls: list[str] = []

    def labeller(key: str) -> Any:
        def answer(req: Json) -> Json:
            calls.append(key)
            if key in (req["object"]["metadata"].get("labels") or {}):
                return allow(req)
            return patch_response(
                req, [{"op": "add", "path": f"/metadata/labels/{key}", "value": str(len(calls))}]
            )

        return answer

    async with CaptureWebhook(labeller("a")) as a, CaptureWebhook(labeller("b")) as b:
        await client.register(
            hook(a.url, a.ca_bundle, name="a.test.corral.dev", reinvocationPolicy="IfNeeded"),
            name="1-a",
        )
        await client.register(hook(b.url, b.ca_bundle, name="b.test.corral.dev"), name="2-b")
        status, body, _ = await client.create_pod(plain_pod("r"))
        assert status == 201 and body["metadata"]["labels"] == {"app": "r", "a": "1", "b": "2"}
        # b changed the object after a: a is called once more and sees b's label
        assert calls == ["a", "b", "a"]
        assert a.reviews[1]["request"]["object"]["metadata"]["labels"] == {
            "app": "r",
            "a": "1",
            "b": "2",
        }
        calls.clear()
        await client.send(
            "PATCH",
            f"{MWC_PATH}/1-a",
            [{"op": "replace", "path": "/webhooks/0/reinvocationPolicy", "value": "Never"}],
            "application/json-patch+json",
        )
        await client.create_pod(plain_pod("s"))
        assert calls == ["a", "b"]


async def test_match_conditions_and_service_references(api: ApiServer, client: Client) -> None:
    async with CaptureWebhook(dns_names=("hook.corral-system.svc",)) as h:
        await client.register(
            {
                **hook(h.url, h.ca_bundle),
                "clientConfig": {
                    "service": {"namespace": "corral-system", "name": "hook", "path": "/mutate"},
                    "caBundle": h.ca_bundle,
                },
                "matchConditions": [
                    {
                        "name": "not-skipped",
                        "expression": "!has(object.metadata.annotations) || "
                        "!('skip' in object.metadata.annotations) || "
                        "object.metadata.annotations['skip'].trim().lowerAscii() != 'true'",
                    }
                ],
            }
        )
        status, body, _ = await client.create_pod(plain_pod("unmapped"))
        assert status == 500
        assert 'Post "https://hook.corral-system.svc:443/mutate?timeout=10s"' in body["message"]
        api.admission.map_service("corral-system", "hook", h.base)
        status, _, _ = await client.create_pod(plain_pod("a"))
        skipped = plain_pod("b")
        skipped["metadata"]["annotations"] = {"skip": " TRUE "}
        status, _, _ = await client.create_pod(skipped)
        assert status == 201
        assert [r["request"]["name"] for r in h.reviews] == ["a"]
        stored = api.store.get(
            api.store.resource("mutatingwebhookconfigurations", "admissionregistration.k8s.io"),
            "",
            "capture",
        )
        svc = stored["webhooks"][0]["clientConfig"]["service"]
        assert svc["port"] == 443  # defaulted as the API server stores it
    # the certificate names hook.corral-system.svc; a Service by another name fails TLS
    async with CaptureWebhook() as plain:
        api.admission.map_service("corral-system", "hook", plain.base)
        await client.send(
            "PATCH",
            f"{MWC_PATH}/capture",
            [
                {
                    "op": "replace",
                    "path": "/webhooks/0/clientConfig/caBundle",
                    "value": plain.ca_bundle,
                }
            ],
            "application/json-patch+json",
        )
        status, body, _ = await client.create_pod(plain_pod("c"))
        assert status == 500 and "x509" in body["message"]


async def test_configurations_are_defaulted_and_never_sent_to_webhooks(
    api: ApiServer, client: Client, capture: CaptureWebhook
) -> None:
    everything = [
        {"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["*"], "resources": ["*/*"]}
    ]
    await client.register(hook(capture.url, capture.ca_bundle, rules=everything))
    status, body, _ = await client.send("GET", f"{MWC_PATH}/capture")
    h = body["webhooks"][0]
    assert (h["failurePolicy"], h["matchPolicy"], h["timeoutSeconds"]) == ("Fail", "Equivalent", 10)
    assert (h["namespaceSelector"], h["objectSelector"], h["reinvocationPolicy"]) == (
        {},
        {},
        "Never",
    )
    assert h["rules"][0]["scope"] == "*"
    await client.register(hook(capture.url, capture.ca_bundle, rules=everything), name="second")
    await client.send("DELETE", f"{MWC_PATH}/second")
    assert capture.reviews == []
    # a DELETE of anything else is sent, with the old object and no object
    await client.create_pod(plain_pod("gone"))
    status, body, _ = await client.send("DELETE", f"/api/v1/namespaces/{NS}/pods/gone")
    assert status == 200
    last = capture.reviews[-1]["request"]
    assert last["operation"] == "DELETE" and last["object"] is None
    assert last["oldObject"]["metadata"]["name"] == "gone"
    assert last["options"]["kind"] == "DeleteOptions"


async def test_match_policy_equivalent(
    api: ApiServer, client: Client, capture: CaptureWebhook
) -> None:
    """A rule that names v1 of a resource also catches a request for an equivalent
    version under Equivalent (not Exact); the webhook gets it as the version it named."""
    api.store.register_crd(
        {
            "spec": {
                "group": "example.com",
                "names": {"plural": "widgets", "kind": "Widget"},
                "scope": "Namespaced",
                "versions": [{"name": "v1", "served": True}, {"name": "v2", "served": True}],
            }
        }
    )
    api.admission.equivalents[("example.com", "v2", "widgets")] = [
        ("example.com", "v1", "widgets", "Widget")
    ]
    v1_rule = {
        "apiGroups": ["example.com"],
        "apiVersions": ["v1"],
        "operations": ["CREATE"],
        "resources": ["widgets"],
    }
    await client.register(
        hook(capture.url, capture.ca_bundle, rules=[v1_rule], matchPolicy="Exact")
    )
    widget = {"apiVersion": "example.com/v2", "kind": "Widget", "metadata": {"name": "w1"}}
    status, _, _ = await client.send(
        "POST", f"/apis/example.com/v2/namespaces/{NS}/widgets", widget
    )
    assert status == 201 and capture.reviews == []
    await client.send(
        "PATCH",
        f"{MWC_PATH}/capture",
        [{"op": "replace", "path": "/webhooks/0/matchPolicy", "value": "Equivalent"}],
        "application/json-patch+json",
    )
    widget["metadata"]["name"] = "w2"
    status, _, _ = await client.send(
        "POST", f"/apis/example.com/v2/namespaces/{NS}/widgets", widget
    )
    assert status == 201
    [review] = capture.reviews
    req = review["request"]
    assert req["kind"] == {"group": "example.com", "version": "v1", "kind": "Widget"}
    assert req["resource"] == {"group": "example.com", "version": "v1", "resource": "widgets"}
    assert req["requestKind"]["version"] == "v2" and req["requestResource"]["version"] == "v2"
    assert req["object"]["apiVersion"] == "example.com/v1"
