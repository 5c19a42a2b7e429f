"""The aiohttp application that speaks the Kubernetes REST protocol over an
:class:`~tests.kubeapi.store.ApiStore`.

Paths are resolved the way the API server does: ``/api/v1/...`` for the core group,
``/apis/{group}/{version}/...`` for the others, ``namespaces/{ns}/`` before namespaced
collections, and ``{name}/{subresource}`` after an object.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

import orjson
from aiohttp import web

from tests.kubeapi import discovery, fields, openapi
from tests.kubeapi.admitted import AdmittedWrites
from tests.kubeapi.auth import (
    ADMIN,
    Attributes,
    Identity,
    authorize,
    forbidden_message,
    identity_of,
)
from tests.kubeapi.crds import prune
from tests.kubeapi.faults import Faults, RequestRecord
from tests.kubeapi.protobuf import PROTOBUF, access_review_from_protobuf, unsupported
from tests.kubeapi.released_schemas import decode_error
from tests.kubeapi.resources import ResourceType, copy_json, served
from tests.kubeapi.status import ApiStatusError, status_body
from tests.kubeapi.store import ApiStore
from tests.kubeapi.volcano_admission import VolcanoPodValidation

__all__ = [
    "DENIED",
    "FAULTS",
    "LOG",
    "SETTINGS",
    "STORE",
    "USER",
    "WRITES",
    "Settings",
    "make_app",
]

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Settings:
    bookmark_interval: float = 1.0  # seconds between BOOKMARKs on a quiet watch
    tokens: frozenset[str] | None = None  # accepted bearer tokens; None: no authentication
    # bearer token -> the userInfo admission reviews carry for its requests (else admin)
    users: dict[str, dict[str, object]] = field(default_factory=dict)


STORE = web.AppKey("store", ApiStore)
DENIED = web.AppKey("denied", list[RequestRecord])
IDENTITY = web.RequestKey("identity", Identity)
FAULTS = web.AppKey("faults", Faults)
LOG = web.AppKey("log", list[RequestRecord])
SETTINGS = web.AppKey("settings", Settings)
# Writes go through the mutating admission chain (tests/kubeapi/webhooks.py).
WRITES = web.AppKey("writes", AdmittedWrites)
# Per request: the userInfo admission reports (set by authentication; admin otherwise),
# and the warnings webhooks returned, sent back as Warning headers.
USER = web.RequestKey("user", dict[str, object])
_WARNINGS = web.RequestKey("warnings", list[str])

_PATCH_TYPES = (
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/json-patch+json",
)


def _json(body: object, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(
        body=orjson.dumps(body), status=status, content_type="application/json", headers=headers
    )


def _request_record(request: web.Request) -> RequestRecord:
    return RequestRecord(
        request.method,
        request.path,
        dict(request.query),
        request.content_type if request.body_exists else "",
        request.headers.get("Authorization", ""),
        request.headers.get("User-Agent", ""),
    )


@web.middleware
async def _record(request: web.Request, handler: web.Handler) -> web.StreamResponse:
    request.app[LOG].append(_request_record(request))
    return await handler(request)


@web.middleware
async def _warnings(request: web.Request, handler: web.Handler) -> web.StreamResponse:
    """Webhook warnings as ``Warning: 299 - "..."`` headers, on errors too."""
    request[_WARNINGS] = []
    resp = await handler(request)
    for w in request[_WARNINGS]:
        escaped = w.replace("\\", "\\\\").replace('"', '\\"')
        resp.headers.add("Warning", f'299 - "{escaped}"')
    return resp


def _admission(request: web.Request) -> dict[str, object]:
    return {"warnings": request[_WARNINGS], "user": request.get(USER) or _user_info(ADMIN)}


def _user_info(who: Identity) -> dict[str, object]:
    """The userInfo of an AdmissionReview for an authenticated identity."""
    return {"username": who.user, "groups": list(who.groups)}


@web.middleware
async def _errors(request: web.Request, handler: web.Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except ApiStatusError as e:
        return _json(e.body(), e.code, e.headers or None)
    except web.HTTPException:
        raise
    except asyncio.CancelledError:
        raise
    except Exception as e:  # a bug in the fake server: say so, as the real one would
        log.exception("in-memory API server failed on %s %s", request.method, request.path)
        return _json(status_body(500, "InternalError", f"{type(e).__name__}: {e}"), 500)


@web.middleware
async def _auth(request: web.Request, handler: web.Handler) -> web.StreamResponse:
    """Who is asking: a ServiceAccount by a token the server minted, else an admin (a
    static token of ``Settings.tokens`` or ``Settings.users``, or a request without
    credentials when the server has no static tokens: the tests' client-certificate
    admin); 401 for any token the server does not know, as kube-apiserver answers
    (``staging/src/k8s.io/apiserver/pkg/endpoints/filters/authentication.go``), or for a
    minted token whose ServiceAccount is gone."""
    store = request.app[STORE]
    tokens = request.app[SETTINGS].tokens
    header = request.headers.get("Authorization", "")
    token = header[7:] if header.startswith("Bearer ") else None
    who: Identity | None = None
    if token is not None and (claims := store.tokens.verify(token)) is not None:
        who = identity_of(store, claims)
        if who is None:
            return _json(status_body(401, "Unauthorized", "Unauthorized"), 401)
    elif token is None:
        who = ADMIN if tokens is None else None  # the tests' client-certificate admin
    elif (tokens is not None and token in tokens) or token in request.app[SETTINGS].users:
        who = ADMIN
    if who is None:
        return _json(status_body(401, "Unauthorized", "Unauthorized"), 401)
    request[IDENTITY] = who
    # the userInfo admission reports: a test may name one for a token
    users = request.app[SETTINGS].users
    request[USER] = (users.get(token) if token is not None else None) or _user_info(who)
    return await handler(request)


def _verb(method: str, t: _Target, watch: bool) -> str:
    if method == "GET":
        return "get" if t.name is not None else ("watch" if watch else "list")
    if method == "DELETE" and t.name is None:
        return "deletecollection"
    return {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(
        method, method.lower()
    )


def _authorize(request: web.Request, t: _Target) -> None:
    """403, worded as the API server words it, unless RBAC allows the request."""
    who: Identity = request[IDENTITY]
    if who.admin:
        return
    name = t.name or ""
    namespace = t.namespace or ""
    if (t.rt.group, t.rt.plural) == ("", "namespaces") and name:
        namespace = name  # a namespace is authorised within itself
    attrs = Attributes(
        _verb(request.method, t, _flag(request.query.get("watch"))),
        t.rt.group,
        t.rt.plural,
        t.subresource,
        namespace,
        name,
    )
    allowed, _ = authorize(request.app[STORE], who, attrs)
    if not allowed:
        request.app[DENIED].append(_request_record(request))
        message, details = forbidden_message(who, attrs)
        raise ApiStatusError(403, "Forbidden", message, details)


def _access_review(request: web.Request, body: object) -> dict[str, object]:
    """A SelfSubjectAccessReview answered for the requester."""
    if not isinstance(body, dict) or not isinstance(body.get("spec"), dict):
        raise ApiStatusError(400, "BadRequest", "the body must be a SelfSubjectAccessReview")
    spec = body["spec"]
    ra = spec.get("resourceAttributes") or {}
    who: Identity = request[IDENTITY]
    attrs = Attributes(
        str(ra.get("verb", "")),
        str(ra.get("group", "")),
        str(ra.get("resource", "")),
        str(ra.get("subresource", "")),
        str(ra.get("namespace", "")),
        str(ra.get("name", "")),
    )
    allowed, reason = authorize(request.app[STORE], who, attrs)
    status: dict[str, object] = {"allowed": allowed}
    if reason:
        status["reason"] = reason
    return {
        "kind": "SelfSubjectAccessReview",
        "apiVersion": "authorization.k8s.io/v1",
        "metadata": {"creationTimestamp": None},
        "spec": spec,
        "status": status,
    }


@web.middleware
async def _faults(request: web.Request, handler: web.Handler) -> web.StreamResponse:
    faults = request.app[FAULTS]
    delay = faults.latency_for(request)
    if delay > 0:
        await asyncio.sleep(delay)
    rule = faults.failure_for(request)
    if rule is not None:
        reason = {429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable"}.get(
            rule.status, "Injected"
        )
        headers = {"Retry-After": str(rule.retry_after)} if rule.retry_after is not None else None
        message = rule.message or f"injected fault: {rule.status}"
        return _json(status_body(rule.status, reason, message), rule.status, headers)
    return await handler(request)


@dataclass(frozen=True, slots=True)
class _Target:
    rt: ResourceType
    namespace: str | None
    name: str | None
    subresource: str


def _not_found() -> ApiStatusError:
    return ApiStatusError(404, "NotFound", "the server could not find the requested resource")


def _resolve(store: ApiStore, path: str) -> _Target:
    segs = [s for s in path.split("/") if s]
    if len(segs) >= 2 and segs[0] == "api":
        group, version, rest = "", segs[1], segs[2:]
    elif len(segs) >= 3 and segs[0] == "apis":
        group, version, rest = segs[1], segs[2], segs[3:]
    else:
        raise _not_found()
    namespace: str | None = None
    if len(rest) >= 3 and rest[0] == "namespaces":
        rt = store.types.get((group, version, rest[2]))
        if rt is not None and rt.namespaced:
            namespace, rest = rest[1], rest[2:]
    if not rest or len(rest) > 3:
        raise _not_found()
    rt = store.types.get((group, version, rest[0]))
    if rt is None or not served(rt, store.versions):
        raise _not_found()
    name = rest[1] if len(rest) > 1 else None
    sub = rest[2] if len(rest) > 2 else ""
    if rt.namespaced and namespace is None and name is not None:
        raise _not_found()
    if not rt.namespaced and namespace is not None:
        raise _not_found()
    if sub and sub not in ("status", "eviction", "binding", "token"):
        raise _not_found()
    if sub == "token" and (rt.group, rt.plural) != ("", "serviceaccounts"):
        raise _not_found()
    if sub == "status" and not rt.status_subresource:
        raise _not_found()
    if sub in ("eviction", "binding") and (rt.group, rt.plural) != ("", "pods"):
        raise _not_found()
    return _Target(rt, namespace, name, sub)


def _int_option(value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lstrip("-").isdigit():
        return int(value)
    raise ApiStatusError(400, "BadRequest", f"gracePeriodSeconds must be an integer, got {value!r}")


def _flag(value: str | None) -> bool:
    return (value or "").lower() in ("true", "1")


def _dry_run(request: web.Request) -> bool:
    values = request.query.getall("dryRun", [])
    for v in values:
        if v != "All":
            raise ApiStatusError(
                400, "BadRequest", f"Invalid dryRun value {v!r}: only All is supported"
            )
    return bool(values)


async def _body(request: web.Request) -> object:
    raw = await request.read()
    if not raw:
        raise ApiStatusError(400, "BadRequest", "the request has no body")
    if request.content_type == PROTOBUF:
        if request.path.endswith("/selfsubjectaccessreviews"):
            return access_review_from_protobuf(raw)
        raise unsupported()
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        raise ApiStatusError(400, "BadRequest", f"error decoding the body as JSON: {e}") from None


def _discovery(request: web.Request) -> web.Response | None:
    """``/api/v1``, ``/apis``, ``/apis/{group}``, ``/apis/{group}/{version}`` (every
    authenticated user may read them: the bootstrap ``system:discovery`` role)."""
    if request.method != "GET":
        return None
    store = request.app[STORE]
    segs = [s for s in request.path.split("/") if s]
    doc: object = None
    if len(segs) == 2 and segs[0] == "api":
        doc = discovery.api_resource_list(store, "", segs[1])
    elif segs == ["apis"]:
        aggregated = _aggregated(request, core=False)
        if aggregated is not None:
            return aggregated
        doc = discovery.api_group_list(store)
    elif len(segs) == 2 and segs[0] == "apis":
        doc = discovery.api_group(store, segs[1])
    elif len(segs) == 3 and segs[0] == "apis":
        doc = discovery.api_resource_list(store, segs[1], segs[2])
    else:
        return None
    if doc is None:
        raise _not_found()
    return _json(doc)


def _checked_fields(request: web.Request, t: _Target, body: object, *, patch: bool) -> object:
    """Server-side field validation (:mod:`.fields`) of a create, update or merge patch
    body: a built-in kind's body is decoded by its release's schema (a value of the wrong
    type is 400, as decoding fails); Strict refuses unknown fields, Warn (the default)
    drops them with a warning each, Ignore drops them. Custom resources: the fields their
    CRD's schema prunes."""
    mode = fields.directive(request.query.get("fieldValidation"))
    if not isinstance(body, dict) or t.subresource not in ("", "status"):
        return body
    store = request.app[STORE]
    if t.rt.builtin:
        if not patch:
            mismatch = fields.type_mismatch(t.rt, body, store.versions.kube)
            if mismatch is not None:
                raise decode_error(t.rt.kind, t.rt.version, mismatch)
        unknown = fields.unknown_fields(t.rt, body, store.versions.kube)
    else:
        schema = store.schemas.get(t.rt.gvr)
        unknown = prune(schema, copy_json(body)) if schema is not None else []
    if not unknown or mode == "Ignore":
        pass
    elif mode == "Strict":
        raise fields.strict_error(t.rt, unknown, decoding=not patch)
    else:
        request[_WARNINGS].extend(f'unknown field "{f}"' for f in unknown)
    if unknown and t.rt.builtin:
        body = copy_json(body)
        assert isinstance(body, dict)
        fields.drop_fields(body, unknown)
    return body


async def _handle(request: web.Request) -> web.StreamResponse:
    store = request.app[STORE]
    writes = request.app[WRITES]
    answer = _discovery(request)
    if answer is not None:
        return answer
    t = _resolve(store, request.path)
    _authorize(request, t)
    q = request.query
    ns = t.namespace or ""
    method = request.method
    if method == "GET":
        if t.name is not None:
            return _json(store.get(t.rt, ns, t.name))
        if _flag(q.get("watch")):
            return await _watch(request, t)
        limit = q.get("limit", "0")
        if not limit.isdigit():
            raise ApiStatusError(
                400, "BadRequest", f"limit must be a non-negative integer, got {limit!r}"
            )
        return _json(
            store.list(
                t.rt,
                t.namespace,
                label_selector=q.get("labelSelector"),
                field_selector=q.get("fieldSelector"),
                limit=int(limit),
                continue_token=q.get("continue"),
                resource_version=q.get("resourceVersion"),
                resource_version_match=q.get("resourceVersionMatch"),
            )
        )
    if method == "POST":
        dry = _dry_run(request)
        if t.subresource == "eviction" and t.name is not None:
            evicted = await writes.evict(
                ns, t.name, await _body(request), dry_run=dry, **_admission(request)
            )
            return _json(evicted, 201)
        if t.subresource == "binding" and t.name is not None:
            return _json(store.bind(ns, t.name, await _body(request)), 201)
        if t.subresource == "token" and t.name is not None:
            return _json(store.token_request(ns, t.name, await _body(request)), 201)
        if (t.rt.group, t.rt.plural) == ("authorization.k8s.io", "selfsubjectaccessreviews"):
            return _json(_access_review(request, await _body(request)), 201)
        if t.name is not None or (t.rt.namespaced and t.namespace is None):
            raise ApiStatusError(
                405, "MethodNotAllowed", f"POST is not supported on {request.path}"
            )
        body = _checked_fields(request, t, await _body(request), patch=False)
        created = await writes.create(t.rt, ns, body, dry_run=dry, **_admission(request))
        return _json(created, 201)
    if method == "PUT" and t.name is not None:
        dry = _dry_run(request)
        return _json(
            await writes.replace(
                t.rt,
                ns,
                t.name,
                _checked_fields(request, t, await _body(request), patch=False),
                subresource=t.subresource,
                dry_run=dry,
                **_admission(request),
            )
        )
    if method == "PATCH" and t.name is not None:
        dry = _dry_run(request)
        ctype = request.content_type
        if ctype not in _PATCH_TYPES:
            raise ApiStatusError(
                415,
                "UnsupportedMediaType",
                f"the body of the request was in an unknown format - accepted media types "
                f"include: {', '.join(_PATCH_TYPES)} (got {ctype!r})",
            )
        return _json(
            await writes.patch(
                t.rt,
                ns,
                t.name,
                ctype,
                _checked_fields(request, t, await _body(request), patch=True)
                if ctype != "application/json-patch+json"
                else await _body(request),
                subresource=t.subresource,
                dry_run=dry,
                **_admission(request),
            )
        )
    if method == "DELETE":
        dry = _dry_run(request)
        opts: dict[str, object] = {}
        if request.body_exists:
            raw = await _body(request)
            opts = raw if isinstance(raw, dict) else {}
        pre = opts.get("preconditions") if isinstance(opts.get("preconditions"), dict) else {}
        assert isinstance(pre, dict)
        if opts.get("dryRun") == ["All"]:
            dry = True
        grace = _int_option(opts.get("gracePeriodSeconds", q.get("gracePeriodSeconds")))
        policy = opts.get("propagationPolicy", q.get("propagationPolicy"))
        if policy is None and opts.get("orphanDependents") is not None:
            policy = "Orphan" if opts["orphanDependents"] else "Background"
        if t.name is not None:
            deleted = await writes.delete(
                t.rt,
                ns,
                t.name,
                uid=pre.get("uid"),
                resource_version=pre.get("resourceVersion"),
                dry_run=dry,
                grace_period_seconds=grace,
                propagation_policy=str(policy) if policy is not None else None,
                **_admission(request),
            )
            return _json(store.delete_answer(t.rt, deleted, dry_run=dry))
        doomed = store.list(
            t.rt,
            t.namespace,
            label_selector=q.get("labelSelector"),
            field_selector=q.get("fieldSelector"),
        )["items"]
        for obj in doomed:
            meta = obj["metadata"]
            store.delete(
                t.rt,
                meta.get("namespace", ""),
                meta["name"],
                dry_run=dry,
                grace_period_seconds=grace,
                propagation_policy=str(policy) if policy is not None else None,
            )
        return _json(status_body(200, "", "", success=True))
    raise ApiStatusError(405, "MethodNotAllowed", f"{method} is not supported on {request.path}")


async def _watch(request: web.Request, t: _Target) -> web.StreamResponse:
    store = request.app[STORE]
    settings = request.app[SETTINGS]
    q = request.query
    timeout_raw = q.get("timeoutSeconds")
    if timeout_raw is not None and not timeout_raw.isdigit():
        raise ApiStatusError(
            400, "BadRequest", f"timeoutSeconds must be an integer, got {timeout_raw!r}"
        )
    bookmarks = _flag(q.get("allowWatchBookmarks"))
    resp = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
    resp.enable_chunked_encoding()
    try:
        w = store.watch(
            t.rt,
            t.namespace,
            label_selector=q.get("labelSelector"),
            field_selector=q.get("fieldSelector"),
            resource_version=q.get("resourceVersion"),
        )
    except ApiStatusError as e:
        if e.code != 410:
            raise
        # As the API server does: the watch starts, and its only event is the error.
        await resp.prepare(request)
        await resp.write(orjson.dumps({"type": "ERROR", "object": e.body()}) + b"\n")
        await resp.write_eof()
        return resp
    drop = request.app[FAULTS].drop_for(request)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + int(timeout_raw) if timeout_raw else None
    sent = 0

    def bookmark() -> bytes:
        obj = _bookmark_object(t.rt, str(store.rv))
        return orjson.dumps({"type": "BOOKMARK", "object": obj}) + b"\n"

    interval = settings.bookmark_interval
    next_bookmark = loop.time() + interval
    try:
        await resp.prepare(request)
        while True:
            if drop is not None and sent >= drop.after_events:
                if drop.abort:
                    # Cut the connection: no final chunk, so the client sees a broken stream.
                    if request.transport is not None:
                        request.transport.close()
                    return resp
                break
            now = loop.time()
            if deadline is not None and now >= deadline:
                if bookmarks and w.queue.empty():
                    await resp.write(bookmark())
                break
            # A bookmark promises every change up to its resourceVersion was sent: only
            # with nothing queued.
            if bookmarks and now >= next_bookmark and w.queue.empty():
                await resp.write(bookmark())
                next_bookmark = now + interval
            if w.queue.empty():
                # Wake at least twice a second to notice a client that went away. (Never
                # wait for zero seconds: that times out even with an item ready.)
                wait = min(0.5, next_bookmark - now) if bookmarks else 0.5
                if deadline is not None:
                    wait = min(wait, deadline - now)
                try:
                    item = await asyncio.wait_for(w.queue.get(), max(wait, 0.001))
                except TimeoutError:
                    if request.transport is None or request.transport.is_closing():
                        return resp
                    continue
            else:
                item = w.queue.get_nowait()
            if item is None:
                break
            kind, obj = item
            await resp.write(orjson.dumps({"type": kind, "object": obj}) + b"\n")
            sent += 1
        await resp.write_eof()
    except ConnectionResetError:
        pass  # the client went away
    finally:
        store.unwatch(w)
    return resp


def _bookmark_object(rt: ResourceType, rv: str) -> dict[str, object]:
    """A BOOKMARK's object: an empty object of the watched kind carrying only its
    resourceVersion, serialised as the API server's typed objects are (null times, the
    fields that are never omitted)."""
    obj: dict[str, object] = {"kind": rt.kind, "apiVersion": rt.api_version}
    if not rt.builtin:
        obj["metadata"] = {"resourceVersion": rv}
        return obj
    obj["metadata"] = {"resourceVersion": rv, "creationTimestamp": None}
    if (rt.group, rt.plural) == ("", "pods"):
        obj["spec"] = {"containers": None}
        obj["status"] = {}
    elif (rt.group, rt.plural) == ("batch", "jobs"):
        template = {"metadata": {"creationTimestamp": None}, "spec": {"containers": None}}
        obj["spec"] = {"template": template}
        obj["status"] = {}
    elif rt.status_subresource:
        obj["spec"] = {}
        obj["status"] = {}
    return obj


async def _version(request: web.Request) -> web.Response:
    return _json(discovery.version_info(request.app[STORE]))


def _aggregated(request: web.Request, *, core: bool) -> web.Response | None:
    """Aggregated discovery, for a client that asks for it first."""
    store = request.app[STORE]
    version = discovery.aggregated_version(store, request.headers.get("Accept", ""))
    if version is None:
        return None
    return web.Response(
        body=orjson.dumps(discovery.aggregated_list(store, version, core=core)),
        headers={"Content-Type": discovery.aggregated_content_type(version)},
    )


async def _api_versions(request: web.Request) -> web.Response:
    return _aggregated(request, core=True) or _json(discovery.api_versions(f"{request.host}"))


async def _openapi_v3(request: web.Request) -> web.Response:
    store = request.app[STORE]
    tail = request.match_info.get("tail", "")
    if not tail:
        return _json(openapi.index_document(store))
    segs = tail.split("/")
    doc = None
    if len(segs) == 2 and segs[0] == "api":
        doc = openapi.group_version_document(store, "", segs[1])
    elif len(segs) == 3 and segs[0] == "apis":
        doc = openapi.group_version_document(store, segs[1], segs[2])
    if doc is None:
        raise _not_found()
    return _json(doc)


async def _healthz(request: web.Request) -> web.Response:
    return web.Response(text="ok")


async def _close_watches(app: web.Application) -> None:
    app[STORE].close_watches()


async def _close_webhook_clients(app: web.Application) -> None:
    await app[WRITES].chain.close()


def make_app(
    store: ApiStore | None = None,
    faults: Faults | None = None,
    settings: Settings | None = None,
) -> web.Application:
    """The in-memory API server as an aiohttp application."""
    app = web.Application(middlewares=[_record, _warnings, _errors, _auth, _faults])
    app[STORE] = store or ApiStore()
    app[WRITES] = AdmittedWrites(app[STORE])
    if app[STORE].versions.validates_volcano_pods:
        app[WRITES].validators.append(VolcanoPodValidation(app[STORE]))
    app[FAULTS] = faults or Faults()
    app[LOG] = []
    app[DENIED] = []
    app[SETTINGS] = settings or Settings()
    app.router.add_get("/version", _version)
    app.router.add_get("/api", _api_versions)
    app.router.add_get("/openapi/v3", _openapi_v3)
    app.router.add_get("/openapi/v3/{tail:.+}", _openapi_v3)
    app.router.add_get("/healthz", _healthz)
    app.router.add_route("*", "/api/{tail:.*}", _handle)
    app.router.add_route("*", "/apis", _handle)
    app.router.add_route("*", "/apis/{tail:.*}", _handle)
    # Open watches must end before the server waits for its handlers to finish, so this
    # is a shutdown hook rather than a cleanup context (which runs after that wait).
    app.on_shutdown.append(_close_watches)
    app.on_cleanup.append(_close_webhook_clients)
    return app
