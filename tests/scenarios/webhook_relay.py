"""Corral's webhook in front of the controller models, until the in-memory API server
calls MutatingWebhookConfigurations itself: the webhook runs as its own aiohttp server on
127.0.0.1 and the models' creates of Jobs and pods are first sent to it as the API
server would send them (an AdmissionReview v1 CREATE), with its JSON patch applied
before the object is stored. Its PodGroup reconciler writes to the fake over HTTP."""

from __future__ import annotations

import base64
import json
import uuid
from typing import Any

import aiohttp
import jsonpatch
from aiohttp import web

from tests.controllers import Rest
from tests.kubeapi import ApiServer
from webhook.config import WebhookConfig
from webhook.kube import PodGroupApi
from webhook.podgroups import PodGroupReconciler
from webhook.server import init_app, start

Json = dict[str, Any]

_GROUPS = {"v1": ("", "v1"), "batch/v1": ("batch", "v1")}


class CorralWebhook:
    """``async with CorralWebhook(api) as hook:`` -- corral's webhook on 127.0.0.1;
    ``hook.rest()`` is a client whose creates go through it."""

    def __init__(self, api: ApiServer, config: WebhookConfig | None = None) -> None:
        self.api = api
        self.config = config or WebhookConfig()
        self.reconciler: PodGroupReconciler | None = None
        self.url = ""
        self.reviews: list[Json] = []
        self._runner: web.AppRunner | None = None

    async def __aenter__(self) -> CorralWebhook:
        pg = PodGroupApi(self.api.client("corral-webhook"))
        self.reconciler = PodGroupReconciler(pg.create, pg.resolve_owner, existing=pg.existing)
        app = init_app(self.config, reconciler=self.reconciler)
        self._runner, port = await start(app, "127.0.0.1", 0, None, shutdown_timeout=0.5)
        self.url = f"http://127.0.0.1:{port}/mutate"
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def drain(self) -> None:
        """Wait until the PodGroups the webhook asked for are written."""
        if self.reconciler is not None:
            await self.reconciler.drain()

    def rest(self) -> Rest:
        return AdmittedRest(self.api.url, self)


class AdmittedRest(Rest):
    def __init__(self, url: str, hook: CorralWebhook) -> None:
        super().__init__(url)
        self.hook = hook

    async def create(self, api_version: str, plural: str, namespace: str, body: Json) -> Json:
        if plural in ("pods", "jobs") and api_version in _GROUPS:
            body = await self._admit(api_version, plural, namespace, body)
        made = await super().create(api_version, plural, namespace, body)
        await self.hook.drain()
        return made

    async def _admit(self, api_version: str, plural: str, namespace: str, obj: Json) -> Json:
        group, version = _GROUPS[api_version]
        review = {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": str(uuid.uuid4()),
                "kind": {"group": group, "version": version, "kind": obj["kind"]},
                "resource": {"group": group, "version": version, "resource": plural},
                "requestKind": {"group": group, "version": version, "kind": obj["kind"]},
                "requestResource": {"group": group, "version": version, "resource": plural},
                "namespace": namespace,
                "name": obj["metadata"].get("name", ""),
                "operation": "CREATE",
                "userInfo": {"username": "system:admin"},
                "object": obj,
                "oldObject": None,
                "dryRun": False,
                "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"},
            },
        }
        async with aiohttp.ClientSession() as s, s.post(self.hook.url, json=review) as resp:
            answer = await resp.json()
        self.hook.reviews.append(answer)
        response = answer["response"]
        if not response.get("allowed"):
            raise AssertionError(f"corral's webhook refused {obj['kind']}: {response}")
        if response.get("patch"):
            ops = json.loads(base64.b64decode(response["patch"]))
            obj = jsonpatch.JsonPatch(ops).apply(obj)
        return obj
