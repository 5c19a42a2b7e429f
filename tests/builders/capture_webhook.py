"""A mutating webhook for tests of the admission chain: HTTPS on 127.0.0.1 with its own
CA, recording every AdmissionReview it gets and answering with a test's function."""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import ssl
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from aiohttp import web

from webhook.tls.certificates import issue, new_ca

Json = dict[str, Any]
Answer = Callable[[Json], Json | Awaitable[Json]]

__all__ = ["CaptureWebhook", "allow", "patch_response"]


def allow(request: Json) -> Json:
    return {"uid": request["uid"], "allowed": True}


def patch_response(request: Json, ops: list[Json], **extra: Any) -> Json:
    return {
        "uid": request["uid"],
        "allowed": True,
        "patchType": "JSONPatch",
        "patch": base64.b64encode(orjson.dumps(ops)).decode(),
        **extra,
    }


class CaptureWebhook:
    """``async with CaptureWebhook() as hook:`` -- ``hook.url`` (…/mutate),
    ``hook.ca_bundle`` (base64 PEM, for clientConfig.caBundle), ``hook.reviews``, and
    ``hook.answer`` (request -> response; :func:`allow` by default)."""

    def __init__(self, answer: Answer = allow, *, dns_names: tuple[str, ...] = ()) -> None:
        now = dt.datetime.now(dt.UTC)
        ca_cert, ca_key = new_ca(now, days=1, name="capture-webhook-ca")
        cert, key = issue(
            ca_cert, ca_key, ["localhost", *dns_names], now, ips=["127.0.0.1"], days=1
        )
        self.ca_pem = ca_cert
        self._ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        import tempfile
        from pathlib import Path

        with tempfile.TemporaryDirectory() as d:
            (Path(d) / "c.pem").write_bytes(cert)
            (Path(d) / "k.pem").write_bytes(key)
            self._ctx.load_cert_chain(Path(d) / "c.pem", Path(d) / "k.pem")
        self.answer: Answer = answer
        self.reviews: list[Json] = []
        self.queries: list[str] = []
        self.port = 0
        self._runner: web.AppRunner | None = None

    @property
    def ca_bundle(self) -> str:
        return base64.b64encode(self.ca_pem).decode()

    @property
    def base(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.base}/mutate"

    async def _mutate(self, request: web.Request) -> web.Response:
        review = orjson.loads(await request.read())
        self.reviews.append(review)
        self.queries.append(request.query_string)
        out = self.answer(review["request"])
        if asyncio.iscoroutine(out) or isinstance(out, Awaitable):
            out = await out
        body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": out}
        return web.Response(body=orjson.dumps(body), content_type="application/json")

    async def __aenter__(self) -> CaptureWebhook:
        app = web.Application()
        app.router.add_post("/mutate", self._mutate)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.1)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=self._ctx)
        await site.start()
        self.port = int(self._runner.addresses[0][1])
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
