"""Corral's webhook registered with the in-memory API server as the manifests register it:
the base MutatingWebhookConfiguration (Service corral-system/corral-webhook, rules,
selectors, matchConditions, failurePolicy Fail) with the caBundle of a certificate made
for the Service's name, the Service mapped to the webhook's real TLS server on
127.0.0.1, and its PodGroup reconciler writing to the fake over HTTP. Every create of a
Job or pod in a namespace labelled ``corral.dev/gang-scheduling: enabled`` -- the
test's, the Job controller model's -- goes through it, as on a cluster."""

from __future__ import annotations

import base64
import datetime as dt
import functools
from pathlib import Path
from typing import Any

import yaml
from aiohttp import web

from tests.kubeapi import ApiServer
from webhook.admission.entry import admit
from webhook.config import Backend, WebhookConfig
from webhook.podgroups.calls import live_reconciler
from webhook.podgroups.reconciler import PodGroupReconciler
from webhook.served import discover
from webhook.server import AdmitFn, init_app, start
from webhook.tls.certificates import new_bundle
from webhook.tls.contexts import load_pair, server_context

Json = dict[str, Any]

MANIFEST = Path(__file__).resolve().parents[2] / "manifests/base/mutatingwebhookconfiguration.yaml"
SERVICE = ("corral-system", "corral-webhook")


class CorralWebhook:
    """``async with CorralWebhook(api) as hook:``; ``await hook.drain()`` waits for the
    PodGroups it asked for."""

    def __init__(self, api: ApiServer, config: WebhookConfig | None = None) -> None:
        self.api = api
        self.config = config or WebhookConfig()
        self.reconciler: PodGroupReconciler | None = None
        self._runner: web.AppRunner | None = None

    async def __aenter__(self) -> CorralWebhook:
        ns, name = SERVICE
        bundle = new_bundle(name, ns, dt.datetime.now(dt.UTC))
        ctx = server_context()
        load_pair(ctx, bundle.cert, bundle.key)
        kube = self.api.client("corral-webhook")
        admit_fn: AdmitFn = admit
        served = None
        if self.config.backend is Backend.KUBERNETES:
            # What the API server serves, found at start as the webhook process finds it.
            served = await discover(kube)
            admit_fn = functools.partial(admit, served=served)
        self.reconciler = live_reconciler(kube, self.config, served=served)
        app = init_app(self.config, reconciler=self.reconciler, admit_fn=admit_fn)
        self._runner, port = await start(app, "127.0.0.1", 0, ctx, shutdown_timeout=0.5)
        self.api.admission.map_service(ns, name, f"https://127.0.0.1:{port}")
        mwc: Json = yaml.safe_load(MANIFEST.read_text())
        for w in mwc["webhooks"]:
            w["clientConfig"]["caBundle"] = base64.b64encode(bundle.ca_cert).decode()
        rt = self.api.store.resource(
            "mutatingwebhookconfigurations", "admissionregistration.k8s.io"
        )
        self.api.store.create(rt, "", mwc)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def drain(self) -> None:
        if self.reconciler is not None:
            await self.reconciler.drain()
