"""The validating admission phase: ValidatingWebhookConfigurations called over HTTPS
after the mutating webhooks, on the object as it would be stored, every one of them,
their patches ignored and any refusal final; and the in-process validators."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from tests.builders.capture_webhook import CaptureWebhook, patch_response
from tests.kubeapi import ApiServer, ApiStatusError
from tests.kubeapi import objects as o
from tests.kubeapi.test_admission import NS, Client, hook, plain_pod
from tests.kubeapi.webhooks import Attributes

Json = dict[str, Any]
VWC_PATH = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"


def validating(name: str, *hooks: Json) -> Json:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": list(hooks),
    }


@pytest.fixture
async def client(api: ApiServer) -> AsyncIterator[Client]:
    api.store.create(api.store.resource("namespaces"), "", o.namespace(NS))
    async with aiohttp.ClientSession() as s:
        yield Client(api, s)


async def test_a_validating_webhook_sees_the_final_object_and_can_refuse(
    api: ApiServer, client: Client
) -> None:
    async with CaptureWebhook() as mutator, CaptureWebhook() as judge:
        mutator.answer = lambda req: patch_response(
            req, [{"op": "replace", "path": "/spec/schedulerName", "value": "volcano"}]
        )
        await client.register(hook(mutator.url, mutator.ca_bundle))
        # A patch from a validating webhook is ignored.
        judge.answer = lambda req: patch_response(
            req, [{"op": "replace", "path": "/spec/schedulerName", "value": "nope"}]
        )
        status, body, _ = await client.send(
            "POST", VWC_PATH, validating("judge", hook(judge.url, judge.ca_bundle))
        )
        assert status == 201, body
        # Stored with the v1 defaults, and no reinvocationPolicy (mutating only).
        assert body["webhooks"][0]["failurePolicy"] == "Fail"
        assert "reinvocationPolicy" not in body["webhooks"][0]
        status, pod, _ = await client.create_pod(plain_pod("a"))
        assert status == 201, pod
        assert pod["spec"]["schedulerName"] == "volcano"
        seen = judge.reviews[-1]["request"]["object"]
        assert seen["spec"]["schedulerName"] == "volcano"  # after the mutating webhook
        assert seen["metadata"]["uid"] == pod["metadata"]["uid"]  # and after BeforeCreate
        judge.answer = lambda req: {
            "uid": req["uid"],
            "allowed": False,
            "status": {"code": 403, "message": "no pods today"},
        }
        status, body, _ = await client.create_pod(plain_pod("b"))
        assert (status, body["message"]) == (
            403,
            'admission webhook "capture.test.corral.dev" denied the request: no pods today',
        )
        assert api.store.find(api.store.resource("pods"), NS, "b") is None


async def test_every_validating_webhook_is_called_and_any_refusal_refuses(
    api: ApiServer, client: Client
) -> None:
    async with CaptureWebhook() as yes, CaptureWebhook() as no:
        no.answer = lambda req: {"uid": req["uid"], "allowed": False}
        config = validating(
            "two",
            hook(yes.url, yes.ca_bundle, name="yes.test.corral.dev"),
            hook(no.url, no.ca_bundle, name="no.test.corral.dev"),
        )
        status, body, _ = await client.send("POST", VWC_PATH, config)
        assert status == 201, body
        status, body, _ = await client.create_pod(plain_pod("a"))
        assert status == 400
        assert body["message"] == (
            'admission webhook "no.test.corral.dev" denied the request without explanation'
        )
        assert len(yes.reviews) == len(no.reviews) == 1


async def test_validating_configurations_are_checked_as_the_api_server_checks_them(
    client: Client,
) -> None:
    bad = validating("bad", {"name": "short", "clientConfig": {"url": "https://x"}})
    status, body, _ = await client.send("POST", VWC_PATH, bad)
    assert status == 422
    assert body["message"].startswith(
        'ValidatingWebhookConfiguration.admissionregistration.k8s.io "bad" is invalid: '
    )
    assert "webhooks[0].sideEffects: Required value" in body["message"]


async def test_in_process_validators_run_on_every_write(api: ApiServer, client: Client) -> None:
    seen: list[tuple[str, str, str]] = []

    async def no_b(a: Attributes, obj: Json) -> None:
        seen.append((a.operation, a.subresource, str(obj["metadata"]["name"])))
        if obj["metadata"]["name"] == "b":
            raise ApiStatusError(403, "Forbidden", "b is not allowed")

    api.validators.append(no_b)
    status, _, _ = await client.create_pod(plain_pod("a"))
    assert status == 201
    status, body, _ = await client.create_pod(plain_pod("b"))
    assert (status, body["message"]) == (403, "b is not allowed")
    status, _, _ = await client.send(
        "PATCH",
        f"/api/v1/namespaces/{NS}/pods/a",
        {"metadata": {"labels": {"x": "y"}}},
        "application/merge-patch+json",
    )
    assert status == 200
    status, _, _ = await client.send("DELETE", f"/api/v1/namespaces/{NS}/pods/a")
    assert status == 200
    assert seen == [
        ("CREATE", "", "a"),
        ("CREATE", "", "b"),
        ("UPDATE", "", "a"),
        ("DELETE", "", "a"),
    ]


async def test_a_generated_name_is_the_one_validated_and_stored(
    api: ApiServer, client: Client
) -> None:
    names: list[str] = []

    async def record(a: Attributes, obj: Json) -> None:
        names.append(str(obj["metadata"]["name"]))

    api.validators.append(record)
    pod = plain_pod("x")
    del pod["metadata"]["name"]
    pod["metadata"]["generateName"] = "gen-"
    status, body, _ = await client.create_pod(pod)
    assert status == 201, body
    assert names == [body["metadata"]["name"]]
