"""The controllers' way to the API server: plain JSON over HTTP, as a controller in a
cluster talks to kube-apiserver, so every write goes through the same admission chain,
authorisation and deletion rules as any other client's."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, urlencode

import aiohttp

Json = dict[str, Any]

__all__ = ["Json", "Rest", "RestError", "group_path"]

MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"


class RestError(Exception):
    """A non-2xx answer: ``status`` and the Status ``body``."""

    def __init__(self, method: str, path: str, status: int, body: Any) -> None:
        msg = body.get("message") if isinstance(body, dict) else body
        super().__init__(f"{method} {path} -> {status}: {msg}")
        self.status = status
        self.body = body

    @property
    def reason(self) -> str:
        return str(self.body.get("reason", "")) if isinstance(self.body, dict) else ""


def group_path(api_version: str) -> str:
    """``/api/v1`` or ``/apis/batch/v1``."""
    return f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"


def collection(api_version: str, plural: str, namespace: str | None = None) -> str:
    base = group_path(api_version)
    return f"{base}/namespaces/{quote(namespace)}/{plural}" if namespace else f"{base}/{plural}"


class Rest:
    """A small JSON client of one API server URL. ``headers`` identify the caller (a
    bearer token for a ServiceAccount, a test-client name)."""

    def __init__(self, url: str, headers: Mapping[str, str] | None = None) -> None:
        self.url = url.rstrip("/")
        self.headers = {"Accept": "application/json", **(headers or {})}
        self._session: aiohttp.ClientSession | None = None

    async def _request(
        self,
        method: str,
        path: str,
        body: Any = None,
        content_type: str = "application/json",
        query: Mapping[str, str] | None = None,
    ) -> Any:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=10), headers=self.headers
            )
        url = self.url + path + (f"?{urlencode(query)}" if query else "")
        kw: dict[str, Any] = {}
        if body is not None:
            kw["json"] = body
            kw["headers"] = {"Content-Type": content_type}
        async with self._session.request(method, url, **kw) as resp:
            try:
                doc = await resp.json(content_type=None)
            except ValueError:
                doc = await resp.text()
            if resp.status >= 300:
                raise RestError(method, path, resp.status, doc)
            return doc

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    # --- verbs ------------------------------------------------------------------------

    async def list(
        self,
        api_version: str,
        plural: str,
        namespace: str | None = None,
        label_selector: str | None = None,
    ) -> list[Json]:
        query = {"labelSelector": label_selector} if label_selector else None
        doc = await self._request("GET", collection(api_version, plural, namespace), query=query)
        items: list[Json] = doc.get("items") or []
        kind = str(doc.get("kind", "")).removesuffix("List")
        for item in items:  # list items of built-in types come without them
            item.setdefault("kind", kind)
            item.setdefault("apiVersion", api_version)
        return items

    async def get(self, api_version: str, plural: str, namespace: str, name: str) -> Json | None:
        try:
            doc: Json = await self._request(
                "GET", f"{collection(api_version, plural, namespace)}/{quote(name)}"
            )
        except RestError as e:
            if e.status == 404:
                return None
            raise
        return doc

    async def create(self, api_version: str, plural: str, namespace: str, body: Json) -> Json:
        doc: Json = await self._request("POST", collection(api_version, plural, namespace), body)
        return doc

    async def patch(
        self,
        api_version: str,
        plural: str,
        namespace: str,
        name: str,
        patch: Any,
        *,
        subresource: str = "",
        content_type: str = MERGE,
    ) -> Json:
        path = f"{collection(api_version, plural, namespace)}/{quote(name)}"
        if subresource:
            path += f"/{subresource}"
        doc: Json = await self._request("PATCH", path, patch, content_type)
        return doc

    async def delete(
        self,
        api_version: str,
        plural: str,
        namespace: str,
        name: str,
        options: Json | None = None,
    ) -> Json | None:
        """DELETE; None when the object is already gone."""
        path = f"{collection(api_version, plural, namespace)}/{quote(name)}"
        body = {"kind": "DeleteOptions", "apiVersion": "v1", **(options or {})}
        try:
            doc: Json = await self._request("DELETE", path, body)
        except RestError as e:
            if e.status == 404:
                return None
            raise
        return doc

    async def post_subresource(
        self, api_version: str, plural: str, namespace: str, name: str, sub: str, body: Json
    ) -> Json:
        path = f"{collection(api_version, plural, namespace)}/{quote(name)}/{sub}"
        doc: Json = await self._request("POST", path, body)
        return doc

    async def bind(self, namespace: str, pod: str, node: str) -> Json:
        """POST pods/{pod}/binding, as a scheduler binds."""
        return await self.post_subresource(
            "v1",
            "pods",
            namespace,
            pod,
            "binding",
            {
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": {"name": pod, "namespace": namespace},
                "target": {"apiVersion": "v1", "kind": "Node", "name": node},
            },
        )
