"""The short way to the review handler answers exactly as the router's way does.

``start()`` hands ``POST /mutate`` to the review handler without aiohttp's router (and
reads the content type without parsing it when it is exactly ``application/json``).
Two servers on one event loop, one started with ``start()`` and one behind a plain
``AppRunner`` (every request through the router), get the same requests: every
fixture review, hypothesis-generated junk (random bytes, random JSON, reviews with
random parts broken), on paths and content types around the exact ones; the status,
the content type and the body bytes must be the same."""

from __future__ import annotations

import asyncio
import http.client
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.builders.reviews import FIXTURE_NAMES, fixture
from tests.webhook.test_junk import _CONFIGS, _json, broken_review
from webhook.config import WebhookConfig
from webhook.server import init_app, start


class Pair:
    """Two servers with the same config in one background event loop: ``direct``
    (``start()``) and ``routed`` (a plain ``AppRunner``: the router for everything)."""

    def __init__(self, config: WebhookConfig) -> None:
        self.config = config
        self.loop = asyncio.new_event_loop()
        self.ports: dict[str, int] = {}
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self._start())
        self._ready.set()
        self.loop.run_forever()
        for r in self.runners:
            self.loop.run_until_complete(r.cleanup())
        self.loop.close()

    async def _start(self) -> None:
        from aiohttp import web

        direct, port = await start(init_app(self.config), "127.0.0.1", 0, None)
        routed = web.AppRunner(init_app(self.config), access_log=None)
        await routed.setup()
        site = web.TCPSite(routed, "127.0.0.1", 0)
        await site.start()
        addr = routed.addresses[0]
        self.runners = [direct, routed]
        self.ports = {"direct": port, "routed": int(addr[1])}
        assert routed.server is not None and direct.server is not None
        # The direct runner really goes around the router; the plain one does not.
        assert direct.server.request_handler != direct.app._handle
        assert routed.server.request_handler == routed.app._handle

    def __enter__(self) -> Pair:
        self._thread.start()
        assert self._ready.wait(20)
        self.conns = {
            k: http.client.HTTPConnection("127.0.0.1", p, timeout=20) for k, p in self.ports.items()
        }
        return self

    def __exit__(self, *exc: object) -> None:
        for c in self.conns.values():
            c.close()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(20)

    def ask(
        self, which: str, method: str, path: str, body: bytes, headers: dict[str, str]
    ) -> tuple[int, str | None, bytes]:
        conn = self.conns[which]
        for attempt in (0, 1):
            try:
                conn.request(method, path, body=body, headers=headers)
                r = conn.getresponse()
                data = r.read()
                if r.getheader("Connection", "").lower() == "close":
                    conn.close()
                return r.status, r.getheader("Content-Type"), data
            except (http.client.HTTPException, ConnectionError):
                conn.close()  # a server that closed the connection: once more, anew
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def same(self, method: str, path: str, body: bytes, content_type: str | None) -> Any:
        headers = {} if content_type is None else {"Content-Type": content_type}
        a = self.ask("direct", method, path, body, headers)
        b = self.ask("routed", method, path, body, headers)
        assert a == b, f"{method} {path} ({content_type}): direct {a!r} != routed {b!r}"
        return a


@pytest.fixture(scope="module")
def pairs() -> Iterator[list[Pair]]:
    started = [Pair(c).__enter__() for c in _CONFIGS]
    try:
        yield started
    finally:
        for p in started:
            p.__exit__(None, None, None)


def _dumps(doc: Any) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_every_fixture_gets_the_same_answer(pairs: list[Pair], name: str) -> None:
    body = _dumps(fixture(name))
    for pair in pairs:
        for path in ("/mutate", "/mutate?timeout=10s"):
            status, ctype, data = pair.same("POST", path, body, "application/json")
            assert status == 200 and ctype == "application/json"
            assert json.loads(data)["response"]["uid"] == fixture(name)["request"]["uid"]


_PATHS = [
    "/mutate",
    "/mutate?timeout=10s",
    "/mutate?",
    "/mutate/",
    "/mutate/x",
    "/Mutate",
    "/%6Dutate",
    "/mutate#x",
    "/healthz",
]
_TYPES = [
    "application/json",
    "application/json; charset=utf-8",
    "Application/JSON",
    "application/json ",
    "application/jsonx",
    "text/plain",
    "",
    None,
]
_bodies = st.one_of(
    st.binary(max_size=64),
    _json.map(_dumps),
    broken_review().map(_dumps),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    body=_bodies,
    config_index=st.sampled_from(range(len(_CONFIGS))),
    path=st.sampled_from(_PATHS),
    content_type=st.sampled_from(_TYPES),
    method=st.sampled_from(["POST", "POST", "POST", "GET", "PUT"]),
)
def test_junk_gets_the_same_answer(
    pairs: list[Pair],
    body: bytes,
    config_index: int,
    path: str,
    content_type: str | None,
    method: str,
) -> None:
    status, _, _ = pairs[config_index].same(method, path, body, content_type)
    assert status != 500
