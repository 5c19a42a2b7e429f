"""rbac-forbidden: a ServiceAccount token minted by TokenRequest, used to call the API: what
its Role allows is 200, anything else the real 403 with the exact message; access reviews
about itself; a token the server does not know is 401."""

from __future__ import annotations

import base64
import json

from tests.contract.conftest import ReplayFactory
from tests.kubeapi.kubelet import Kubelet
from tests.kubeapi.recording import Replay


def _claims(token: str) -> dict[str, object]:
    part = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))


def _target(r: Replay) -> dict[str, object]:
    """The pod the recording's ServiceAccount reads (made before its steps)."""
    listed = r.recording.step("as SA: list pods in its own namespace").response
    pod = listed["items"][0]
    containers = [
        {k: c[k] for k in ("name", "image", "command", "resources")}
        for c in pod["spec"]["containers"]
    ]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": pod["metadata"]["name"], "namespace": pod["metadata"]["namespace"]},
        "spec": {"containers": containers},
    }


async def test_every_answer_is_the_recorded_one(replay: ReplayFactory) -> None:
    async with replay("rbac-forbidden", authenticate=True, controllers=[Kubelet()]) as r:
        r.store.load(
            [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "rec-rbac-b"}}]
        )

        def target_running(r: Replay) -> None:
            r.store.create(r.store.resource("pods"), "rec-rbac-a", _target(r))
            r.bind("rec-rbac-a", "target")
            r.settle()

        await r.run(before={"TokenRequest": target_running})
        # The minted token is a JWT naming the ServiceAccount, as the recording decoded it.
        recorded = r.recording.observation("decoded JWT").object
        claims = _claims(r.tokens["serviceaccount:rec-rbac-a/reader"])
        assert set(claims) == set(recorded["claims"])
        assert claims["sub"] == recorded["claims"]["sub"]
        assert claims["aud"] == recorded["claims"]["aud"]
        assert claims["kubernetes.io"]["serviceaccount"]["name"] == "reader"  # type: ignore[index]
