"""A thin JSON client over kubernetes-asyncio's ``ApiClient``.

Every request goes through :class:`KubeClient`, which builds the path from a
:class:`~gangplace.kube.resources.Resource`, checks the call against
:data:`~gangplace.kube.resources.API_CALLS`, and returns plain JSON parsed with orjson
(``_preload_content=False``): the generated typed models cost far more than the
compact records the informers keep, and a raw watch stream lets the informer own the
resourceVersion, bookmarks and 410 handling instead of having them hidden from it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import Any

import aiohttp
import orjson
from kubernetes_asyncio.client import ApiClient

from gangplace.kube.resources import PODS, ApiCall, Resource, check_call, declared_calls

__all__ = ["REQUEST_ERRORS", "TRANSIENT_ERRORS", "ApiError", "KubeClient"]

Json = dict[str, Any]

# Errors worth retrying: the connection failed, timed out, or a stream broke.
TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (
    aiohttp.ClientError,
    asyncio.TimeoutError,
    ConnectionError,
)


class ApiError(Exception):
    """A non-2xx answer from the API server, with its Status body when it sent one."""

    def __init__(
        self,
        status: int,
        reason: str,
        message: str,
        body: Json | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message
        self.body = body
        self.retry_after = retry_after

    @classmethod
    def from_response(
        cls, status: int, data: bytes, headers: Mapping[str, str] | None = None
    ) -> ApiError:
        body: Json | None = None
        try:
            parsed = orjson.loads(data) if data else None
            body = parsed if isinstance(parsed, dict) else None
        except orjson.JSONDecodeError:
            body = None
        if body is not None:
            reason = str(body.get("reason") or "")
            message = str(body.get("message") or "")
        else:
            reason, message = "", data[:500].decode("utf-8", "replace").strip()
        retry_after: float | None = None
        raw_retry = (headers or {}).get("Retry-After")
        if raw_retry:
            try:
                retry_after = max(0.0, float(raw_retry))
            except ValueError:
                retry_after = None
        return cls(status, reason or _REASONS.get(status, "Error"), message, body, retry_after)

    @property
    def causes(self) -> list[Json]:
        details = (self.body or {}).get("details") or {}
        causes = details.get("causes") or []
        return [c for c in causes if isinstance(c, dict)]


# Every way a request can fail: an answer from the server, or no usable answer at all.
REQUEST_ERRORS: tuple[type[BaseException], ...] = (ApiError, *TRANSIENT_ERRORS)

_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    409: "Conflict",
    410: "Gone",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


def _flag(v: bool) -> str:
    return "true" if v else "false"


class KubeClient:
    """JSON requests to the API server; the one object through which the layer talks.

    ``request_timeout`` bounds every request except watches, whose streams are bounded
    by the server-side ``timeoutSeconds`` and a client read timeout a little above it.
    """

    def __init__(self, api: ApiClient, *, request_timeout: float = 30.0) -> None:
        self.api = api
        self.request_timeout = request_timeout
        self._declared = declared_calls()

    def declare(self, calls: tuple[ApiCall, ...]) -> None:
        """Allow ``calls`` beside :data:`~gangplace.kube.resources.API_CALLS`: those on
        the workload kinds a config adds (their RBAC comes from the same config)."""
        self._declared = declared_calls(calls) | self._declared

    async def close(self) -> None:
        await self.api.close()

    async def __aenter__(self) -> KubeClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- plumbing -------------------------------------------------------------------

    async def _send(
        self,
        method: str,
        path: str,
        query: Sequence[tuple[str, str]] = (),
        body: Any = None,
        content_type: str | None = None,
        timeout: float | aiohttp.ClientTimeout | None = None,
    ) -> aiohttp.ClientResponse:
        headers = {"Accept": "application/json"}
        if content_type:
            headers["Content-Type"] = content_type
        resp: aiohttp.ClientResponse = await self.api.call_api(
            path,
            method,
            query_params=list(query),
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
            _preload_content=False,
            _request_timeout=timeout if timeout is not None else self.request_timeout,
        )
        return resp

    async def request(
        self,
        method: str,
        path: str,
        query: Sequence[tuple[str, str]] = (),
        body: Any = None,
        content_type: str | None = None,
    ) -> Json:
        """One request, the JSON answer; :class:`ApiError` on a non-2xx status."""
        resp = await self._send(method, path, query, body, content_type)
        try:
            data = await resp.read()
        finally:
            resp.release()
        if not 200 <= resp.status < 300:
            raise ApiError.from_response(resp.status, data, resp.headers)
        if not data:
            return {}
        out = orjson.loads(data)
        if not isinstance(out, dict):
            raise ApiError(resp.status, "BadResponse", f"expected a JSON object from {path}")
        return out

    # --- verbs ----------------------------------------------------------------------

    async def get(self, resource: Resource, name: str, namespace: str | None = None) -> Json:
        check_call("get", resource, declared=self._declared)
        return await self.request("GET", resource.path(namespace, name))

    async def list(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
    ) -> Json:
        """One page of a list; ``metadata.continue`` names the next page, if any."""
        check_call("list", resource, declared=self._declared)
        query: list[tuple[str, str]] = []
        if label_selector:
            query.append(("labelSelector", label_selector))
        if field_selector:
            query.append(("fieldSelector", field_selector))
        if limit:
            query.append(("limit", str(limit)))
        if continue_token:
            query.append(("continue", continue_token))
        return await self.request("GET", resource.path(namespace), query)

    async def watch(
        self,
        resource: Resource,
        *,
        resource_version: str,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        timeout_seconds: int = 300,
        bookmarks: bool = True,
    ) -> AsyncGenerator[Json, None]:
        """The watch events after ``resource_version``, as parsed JSON, until the server
        ends the stream. An ERROR event is yielded like any other: the caller decides
        (a 410 means relist)."""
        check_call("watch", resource, declared=self._declared)
        query = [
            ("watch", "true"),
            ("resourceVersion", resource_version),
            ("allowWatchBookmarks", _flag(bookmarks)),
            ("timeoutSeconds", str(timeout_seconds)),
        ]
        if label_selector:
            query.append(("labelSelector", label_selector))
        if field_selector:
            query.append(("fieldSelector", field_selector))
        # The server ends the stream after timeout_seconds; a read that stalls well past
        # that means the connection is dead.
        timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=self.request_timeout, sock_read=timeout_seconds + 30
        )
        resp = await self._send("GET", resource.path(namespace), query, timeout=timeout)
        finished = False
        try:
            if resp.status != 200:
                raise ApiError.from_response(resp.status, await resp.read(), resp.headers)
            async for raw in resp.content:
                line = raw.strip()
                if not line:
                    continue
                try:
                    event = orjson.loads(line)
                except orjson.JSONDecodeError:
                    raise ApiError(
                        resp.status, "BadResponse", f"malformed watch event: {line[:200]!r}"
                    ) from None
                if not isinstance(event, dict) or "type" not in event:
                    raise ApiError(
                        resp.status, "BadResponse", f"watch event without a type: {line[:200]!r}"
                    )
                yield event
            finished = True
        finally:
            if finished:
                resp.release()
            else:
                resp.close()

    async def create(
        self,
        resource: Resource,
        body: Mapping[str, Any],
        *,
        namespace: str | None = None,
        dry_run: bool = False,
    ) -> Json:
        check_call("create", resource, declared=self._declared)
        query = [("dryRun", "All")] if dry_run else []
        return await self.request("POST", resource.path(namespace), query, dict(body))

    async def replace(
        self,
        resource: Resource,
        name: str,
        body: Mapping[str, Any],
        *,
        namespace: str | None = None,
    ) -> Json:
        """PUT; a ``metadata.resourceVersion`` in ``body`` makes it conditional (409 when
        the object changed since)."""
        check_call("update", resource, declared=self._declared)
        return await self.request("PUT", resource.path(namespace, name), (), dict(body))

    async def patch(
        self,
        resource: Resource,
        name: str,
        body: Any,
        *,
        namespace: str | None = None,
        content_type: str = "application/json-patch+json",
        subresource: str = "",
    ) -> Json:
        """PATCH: an RFC 6902 JSON patch (a list of operations; a failed ``test`` is a
        422 and changes nothing) or, with ``content_type="application/merge-patch+json"``,
        a merge patch; of ``subresource`` (``status``) when given."""
        check_call("patch", resource, subresource, declared=self._declared)
        return await self.request(
            "PATCH",
            resource.path(namespace, name, subresource),
            (),
            body,
            content_type=content_type,
        )

    async def delete(
        self,
        resource: Resource,
        name: str,
        *,
        namespace: str | None = None,
        propagation: str = "Background",
        uid: str = "",
    ) -> Json:
        """DELETE with a propagationPolicy (Background, Foreground or Orphan); with
        ``uid`` only that object, not a newer one of the same name (409 otherwise)."""
        check_call("delete", resource, declared=self._declared)
        body: Json = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": propagation}
        if uid:
            body["preconditions"] = {"uid": uid}
        return await self.request("DELETE", resource.path(namespace, name), (), body)

    async def evict(
        self, namespace: str, name: str, *, uid: str = "", dry_run: bool = False
    ) -> Json:
        """POST a policy/v1 Eviction. With ``uid``, the API server refuses (409) if the
        pod of that name is no longer the same pod."""
        check_call("create", PODS, "eviction", declared=self._declared)
        body: Json = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace},
        }
        if uid:
            body["deleteOptions"] = {"preconditions": {"uid": uid}}
        query = [("dryRun", "All")] if dry_run else []
        return await self.request("POST", PODS.path(namespace, name, "eviction"), query, body)
