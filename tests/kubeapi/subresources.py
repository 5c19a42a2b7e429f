"""The binding and TokenRequest subresources of the in-memory API server (the eviction
subresource is in :mod:`.disruption`).

:class:`Subresources` is a part of :class:`~tests.kubeapi.store.ApiStore`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from tests.kubeapi.auth import TokenIssuer
from tests.kubeapi.gates import enabled
from tests.kubeapi.resources import ResourceType, copy_json, now_iso
from tests.kubeapi.status import ApiStatusError, status_body
from tests.kubeapi.versions import Versions

Json = dict[str, Any]

__all__ = ["Subresources"]


class Subresources:
    """pods/binding and serviceaccounts/token (a part of
    :class:`~tests.kubeapi.store.ApiStore`)."""

    types: dict[tuple[str, str, str], ResourceType]
    tokens: TokenIssuer
    versions: Versions

    def token_request(self, namespace: str, name: str, body: Any) -> Json:
        """POST serviceaccounts/{name}/token: a signed token for the ServiceAccount."""
        sa = self.get(self.types[("", "v1", "serviceaccounts")], namespace, name)
        if not isinstance(body, dict) or body.get("kind", "TokenRequest") != "TokenRequest":
            raise ApiStatusError(400, "BadRequest", "the body must be a TokenRequest object")
        spec = dict(body.get("spec") or {})
        audiences = spec.get("audiences") or ["https://kubernetes.default.svc"]
        seconds = spec.get("expirationSeconds") or 3600
        if not isinstance(seconds, int) or seconds < 600:
            raise ApiStatusError(
                422,
                "Invalid",
                f'TokenRequest.authentication.k8s.io "{name}" is invalid: '
                "spec.expirationSeconds: Invalid value: "
                f"{seconds}: may not specify a duration less than 10 minutes",
            )
        token, expiry = self.tokens.mint(
            namespace, name, sa["metadata"]["uid"], audiences=list(audiences), seconds=seconds
        )
        return {
            "kind": "TokenRequest",
            "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"name": name, "namespace": namespace, "creationTimestamp": now_iso()},
            "spec": {
                "audiences": list(audiences),
                "expirationSeconds": seconds,
                "boundObjectRef": spec.get("boundObjectRef"),
            },
            "status": {
                "token": token,
                "expirationTimestamp": datetime.fromtimestamp(expiry, UTC).strftime(
                    "%Y-%m-%dT%H:%M:%SZ"
                ),
            },
        }

    def bind(self, namespace: str, name: str, body: Any) -> Json:
        """POST pods/{name}/binding: the scheduler's (or anyone's) assignment of a node. The
        server sets spec.nodeName and the PodScheduled condition itself, and from 1.35
        clears status.nominatedNodeName (ClearingNominatedNodeNameAfterBinding)."""
        pods = self.types[("", "v1", "pods")]
        if not isinstance(body, dict) or body.get("kind", "Binding") != "Binding":
            raise ApiStatusError(400, "BadRequest", "the body must be a Binding object")
        if (body.get("metadata") or {}).get("name") != name:
            raise ApiStatusError(
                400, "BadRequest", "name in URL does not match name in Binding object"
            )
        target = body.get("target") or {}
        node = target.get("name")
        if not node or target.get("kind", "Node") != "Node":
            raise ApiStatusError(
                422,
                "Invalid",
                f'Binding.core "{name}" is invalid: target.name: Required value',
            )
        pod = self.get(pods, namespace, name)

        def conflict(why: str) -> ApiStatusError:
            return ApiStatusError(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on pods/binding "{name}": {why}',
                {"name": name, "kind": "pods/binding"},
            )

        if pod["metadata"].get("deletionTimestamp"):
            raise conflict(f"pod {name} is being deleted, cannot be assigned to a host")
        current = (pod.get("spec") or {}).get("nodeName")
        if current:
            raise conflict(f'pod {name} is already assigned to node "{current}"')
        new = copy_json(pod)
        new["spec"]["nodeName"] = node
        status = new.setdefault("status", {})
        conditions = [c for c in status.get("conditions") or () if c.get("type") != "PodScheduled"]
        conditions.append(
            {
                "type": "PodScheduled",
                "status": "True",
                "lastProbeTime": None,
                "lastTransitionTime": now_iso(),
            }
        )
        status["conditions"] = conditions
        if enabled("ClearingNominatedNodeNameAfterBinding", self.versions.kube):
            status.pop("nominatedNodeName", None)
        self._commit(pods, "MODIFIED", new, pod)
        self._after_write(pods, new)
        return status_body(201, "", "", success=True)
