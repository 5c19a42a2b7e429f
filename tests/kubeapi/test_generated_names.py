"""Names the in-memory API server makes from ``generateName``: shaped like the names the
real one made in the recordings, and a taken one answered as kube-apiserver answers it
(try again), not as a name the client asked for (AlreadyExists)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.kubeapi import ApiStatusError, ApiStore
from tests.kubeapi import objects as o
from tests.kubeapi import store as store_module
from tests.kubeapi.recording import RECORDINGS


def _recorded_names() -> list[tuple[str, str]]:
    """(generateName, name) of every object the recordings show with both."""
    found: set[tuple[str, str]] = set()

    def walk(node: object) -> None:
        if isinstance(node, dict):
            meta = node.get("metadata")
            if isinstance(meta, dict) and meta.get("generateName") and meta.get("name"):
                found.add((meta["generateName"], meta["name"]))
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    for path in sorted(Path(RECORDINGS).glob("*.json")):
        walk(json.loads(path.read_text()))
    return sorted(found)


def _pod_body(prefix: str) -> dict:
    pod = o.pod("x", "ns")
    del pod["metadata"]["name"]
    pod["metadata"]["generateName"] = prefix
    return pod


def _store() -> ApiStore:
    store = ApiStore()
    store.load([o.namespace("ns"), o.node("n1")])
    return store


def test_generated_names_look_like_the_real_servers() -> None:
    recorded = _recorded_names()
    assert len(recorded) >= 5, "the recordings show generated names"
    shape = re.compile(r"[bcdfghjklmnpqrstvwxz2456789]{5}")
    for prefix, name in recorded:
        assert name.startswith(prefix) and shape.fullmatch(name[len(prefix) :]), name
    store = _store()
    pods = store.resource("pods")
    for _ in range(50):
        made = store.create(pods, "ns", _pod_body("w-"))["metadata"]["name"]
        assert made.startswith("w-") and shape.fullmatch(made[2:]), made
    long = store.create(pods, "ns", _pod_body("a" * 70))["metadata"]["name"]
    assert len(long) == 63 and long.startswith("a" * 58)


def test_a_taken_generated_name_asks_to_try_again(monkeypatch: pytest.MonkeyPatch) -> None:
    store = _store()
    pods = store.resource("pods")
    monkeypatch.setattr(store_module.secrets, "choice", lambda alphabet: alphabet[0])
    store.create(pods, "ns", _pod_body("w-"))
    with pytest.raises(ApiStatusError) as taken:
        store.create(pods, "ns", _pod_body("w-"))
    assert (taken.value.code, taken.value.reason) == (500, "ServerTimeout")
    assert taken.value.message == (
        "The POST operation against pods could not be completed at this time, please try again."
    )
    # A name the client asked for is still AlreadyExists.
    body = o.pod("w-bbbbb", "ns")
    with pytest.raises(ApiStatusError) as asked:
        store.create(pods, "ns", body)
    assert (asked.value.code, asked.value.reason) == (409, "AlreadyExists")
