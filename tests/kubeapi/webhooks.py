"""The admission chain of the in-memory API server: MutatingWebhookConfigurations (and,
after them, ValidatingWebhookConfigurations: :meth:`AdmissionChain.validate`) called over
real HTTPS, as kube-apiserver v1.28 calls them.

What it does, in the API server's order and with its messages:

- configurations sorted by name, their webhooks in order; requests on the webhook
  configurations themselves are never sent to webhooks;
- a webhook is called when its namespaceSelector matches the namespace's labels (the
  object's own labels for a Namespace), its objectSelector matches the object's or the
  old object's labels, one of its rules matches (operations, apiGroups, apiVersions,
  resources with ``pods/eviction``, ``pods/*``, ``*/*`` for subresources, scope), and
  every matchCondition (CEL) is true;
- ``matchPolicy: Equivalent`` tries the resources the server declares equivalent
  (:attr:`AdmissionChain.equivalents`; none by default, as the fake converts nothing);
- dry-run requests fail with 400 for a webhook whose sideEffects is not None or
  NoneOnDryRun (only reachable for configurations stored without validation: v1
  refuses them at creation, as :func:`validate_configuration` does);
- the AdmissionReview (admission.k8s.io/v1) has the real request's fields; the call
  has ``?timeout=Ns``, verifies the server with ``caBundle`` (against the host of the
  URL, or ``NAME.NAMESPACE.svc`` for a Service, which a test maps to an address with
  :meth:`AdmissionChain.map_service`) and gives up after ``timeoutSeconds``;
- failures to call (refused, TLS, timeout, a bad response) are "failed calling
  webhook" 500s under failurePolicy Fail and skipped under Ignore; ``allowed: false``
  is the webhook's status with its code (at least 400) and "admission webhook ... denied
  the request"; a JSONPatch that cannot be applied is a 500 whatever the policy;
- the patched object is defaulted again (only fields still unset, :func:`.defaults.redefault`),
  as the dispatcher does after each patch;
- ``warnings`` are collected for the response's ``Warning: 299 - "..."`` headers;
- reinvocationPolicy IfNeeded: when a later webhook changed the object, every earlier
  IfNeeded webhook is called once more (one extra round at most).
"""

from __future__ import annotations

import asyncio
import base64
import copy
import ssl
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import jsonpatch
import jsonpointer
import orjson
from gangplace.engine.selectors import LabelSelector, SelectorError

from tests.kubeapi.defaults import redefault
from tests.kubeapi.resources import ResourceType
from tests.kubeapi.status import ApiStatusError
from tests.kubeapi.store import ApiStore

Json = dict[str, Any]

__all__ = [
    "ADMIN",
    "AdmissionChain",
    "Attributes",
    "default_configuration",
    "validate_configuration",
]

# The recordings' "admin": a client certificate with CN admin, O system:masters.
ADMIN: Json = {"username": "admin", "groups": ["system:masters", "system:authenticated"]}

_CONFIG_RESOURCES = frozenset(
    {
        ("admissionregistration.k8s.io", "mutatingwebhookconfigurations"),
        ("admissionregistration.k8s.io", "validatingwebhookconfigurations"),
        ("admissionregistration.k8s.io", "validatingadmissionpolicies"),
        ("admissionregistration.k8s.io", "validatingadmissionpolicybindings"),
    }
)
_DEFAULT_TIMEOUT = 10
_MUTATING = "mutatingwebhookconfigurations"
_VALIDATING = "validatingwebhookconfigurations"


@dataclass(frozen=True, slots=True)
class Attributes:
    """One request as admission sees it. ``kind`` is (group, version, kind) of the object
    sent (policy/v1 Eviction for ``pods/eviction``); ``object`` is None for DELETE."""

    operation: str
    rt: ResourceType
    subresource: str
    namespace: str
    name: str
    object: Json | None
    old_object: Json | None
    dry_run: bool
    options: Json
    user: Json
    kind: tuple[str, str, str]


@dataclass(slots=True)
class _Call:
    """One webhook call's outcome."""

    changed: bool
    obj: Json | None


class _CallFailed(Exception):
    """The API server could not get an answer it can use: failurePolicy decides."""


def _gvk(group: str, version: str, kind: str) -> Json:
    return {"group": group, "version": version, "kind": kind}


def _gvr(group: str, version: str, resource: str) -> Json:
    return {"group": group, "version": version, "resource": resource}


# --- configurations: defaults and validation, as the API server stores them ------------


def default_configuration(obj: Json, *, mutating: bool = True) -> Json:
    """A Mutating- (or Validating-) WebhookConfiguration with the v1 defaults filled in
    (what a GET shows); only mutating webhooks have a reinvocationPolicy."""
    out = copy.deepcopy(obj)
    for hook in out.get("webhooks") or ():
        if not isinstance(hook, dict):
            continue
        hook.setdefault("failurePolicy", "Fail")
        hook.setdefault("matchPolicy", "Equivalent")
        hook.setdefault("namespaceSelector", {})
        hook.setdefault("objectSelector", {})
        hook.setdefault("timeoutSeconds", _DEFAULT_TIMEOUT)
        if mutating:
            hook.setdefault("reinvocationPolicy", "Never")
        for rule in hook.get("rules") or ():
            if isinstance(rule, dict):
                rule.setdefault("scope", "*")
        svc = (hook.get("clientConfig") or {}).get("service")
        if isinstance(svc, dict):
            svc.setdefault("port", 443)
    return out


def validate_configuration(
    obj: Json, old: Json | None = None, *, kind: str = "MutatingWebhookConfiguration"
) -> None:
    """The admissionregistration/v1 checks a user meets first (422 Invalid). On an
    update, faults the stored object already had are let through: only objects stored
    behind the API's back (``ApiStore.load``) have any, and tests patch those."""
    name = (obj.get("metadata") or {}).get("name", "")
    errors = _configuration_errors(obj)
    if old is not None:
        known = set(_configuration_errors(old))
        errors = [e for e in errors if e not in known]
    if errors:
        message = "; ".join(f"{f}: {m}" for f, m in errors)
        if len(errors) > 1:
            message = f"[{message.replace('; ', ', ')}]"
        raise ApiStatusError(
            422,
            "Invalid",
            f'{kind}.admissionregistration.k8s.io "{name}" is invalid: {message}',
            {
                "name": name,
                "group": "admissionregistration.k8s.io",
                "kind": kind,
                "causes": [
                    {"reason": "FieldValueInvalid", "message": m, "field": f} for f, m in errors
                ],
            },
        )


def _configuration_errors(obj: Json) -> list[tuple[str, str]]:
    errors: list[tuple[str, str]] = []
    seen: set[str] = set()
    for i, hook in enumerate(obj.get("webhooks") or ()):
        at = f"webhooks[{i}]"
        if not isinstance(hook, dict):
            errors.append((at, "Invalid value: must be an object"))
            continue
        hname = hook.get("name") or ""
        if not hname:
            errors.append((f"{at}.name", "Required value"))
        elif hname.count(".") < 2:
            errors.append(
                (
                    f"{at}.name",
                    f'Invalid value: "{hname}": should be a domain with at least three '
                    "segments separated by dots",
                )
            )
        elif hname in seen:
            errors.append((f"{at}.name", f'Duplicate value: "{hname}"'))
        seen.add(hname)
        if not hook.get("admissionReviewVersions"):
            errors.append(
                (
                    f"{at}.admissionReviewVersions",
                    "Required value: must specify one of v1, v1beta1",
                )
            )
        side = hook.get("sideEffects")
        if side is None:
            errors.append(
                (f"{at}.sideEffects", 'Required value: must specify one of "None", "NoneOnDryRun"')
            )
        elif side not in ("None", "NoneOnDryRun"):
            errors.append(
                (
                    f"{at}.sideEffects",
                    f'Unsupported value: "{side}": supported values: "None", "NoneOnDryRun"',
                )
            )
        timeout = hook.get("timeoutSeconds")
        if timeout is not None and not (isinstance(timeout, int) and 1 <= timeout <= 30):
            errors.append(
                (
                    f"{at}.timeoutSeconds",
                    f"Invalid value: {timeout}: the timeout value must be between 1 and 30 seconds",
                )
            )
        cc = hook.get("clientConfig") or {}
        has_url, has_svc = bool(cc.get("url")), bool(cc.get("service"))
        if has_url == has_svc:
            errors.append(
                (f"{at}.clientConfig", "Required value: exactly one of url or service is required")
            )
        elif has_url and not str(cc["url"]).startswith("https://"):
            errors.append(
                (
                    f"{at}.clientConfig.url",
                    f'Unsupported value: "{str(cc["url"]).split(":")[0]}": supported values: '
                    '"https"',
                )
            )
        for key in ("failurePolicy", "matchPolicy", "reinvocationPolicy"):
            allowed = {
                "failurePolicy": ("Fail", "Ignore"),
                "matchPolicy": ("Exact", "Equivalent"),
                "reinvocationPolicy": ("Never", "IfNeeded"),
            }[key]
            v = hook.get(key)
            if v is not None and v not in allowed:
                errors.append(
                    (
                        f"{at}.{key}",
                        f'Unsupported value: "{v}": supported values: '
                        + ", ".join(f'"{a}"' for a in allowed),
                    )
                )
        for key in ("namespaceSelector", "objectSelector"):
            try:
                LabelSelector.from_json(hook.get(key), f"{at}.{key}")
            except SelectorError as e:
                errors.append((f"{at}.{key}", str(e)))
    return errors


# --- matching ---------------------------------------------------------------------------


def _rule_matches(
    rule: Mapping[str, Any], a: Attributes, group: str, version: str, resource: str
) -> bool:
    def has(key: str, value: str) -> bool:
        values = rule.get(key) or ()
        return "*" in values or value in values

    if not (has("operations", a.operation) and has("apiGroups", group)):
        return False
    if not has("apiVersions", version):
        return False
    wanted = f"{resource}/{a.subresource}" if a.subresource else resource
    ok = False
    for r in rule.get("resources") or ():
        if r == wanted or r == "*/*":
            ok = True
        elif a.subresource:
            ok = ok or r in (f"{resource}/*", f"*/{a.subresource}")
        else:
            ok = ok or r == "*"
    if not ok:
        return False
    scope = rule.get("scope") or "*"
    is_ns_object = (a.rt.group, a.rt.plural) == ("", "namespaces")
    if scope == "Namespaced":
        return not is_ns_object and a.namespace != ""
    if scope == "Cluster":
        return is_ns_object or a.namespace == ""
    return True


def _labels(obj: Json | None) -> Mapping[str, str] | None:
    if not isinstance(obj, dict):
        return None
    meta = obj.get("metadata")
    return (meta.get("labels") or {}) if isinstance(meta, dict) else None


def _selector(hook: Mapping[str, Any], key: str) -> LabelSelector | None:
    """None for an empty selector (matches everything)."""
    raw = hook.get(key)
    if not raw:
        return None
    try:
        return LabelSelector.from_json(raw, key)
    except SelectorError as e:
        raise ApiStatusError(500, "InternalError", f"Internal error occurred: {e}") from None


class _Conditions:
    """matchConditions compiled with the CEL implementation of cel-expr-python and the
    strings extension (``trim``, ``lowerAscii``, ...), as Kubernetes' CEL environment
    has them. Variables: ``object``, ``oldObject``, ``request``."""

    def __init__(self) -> None:
        self._compiled: dict[str, Any] = {}
        self._env: Any = None

    def _compile(self, expression: str) -> Any:
        if self._env is None:
            from cel_expr_python import cel
            from cel_expr_python.ext import ext_strings

            self._env = cel.NewEnv(
                variables={
                    "object": cel.Type.DYN,
                    "oldObject": cel.Type.DYN,
                    "request": cel.Type.DYN,
                },
                extensions=[ext_strings.ExtStrings()],
            )
        if expression not in self._compiled:
            self._compiled[expression] = self._env.compile(expression)
        return self._compiled[expression]

    def evaluate(self, conditions: Sequence[Mapping[str, Any]], data: Json) -> list[str | bool]:
        """Per condition: True, False, or the error message."""
        out: list[str | bool] = []
        for c in conditions:
            try:
                value = self._compile(str(c.get("expression", ""))).eval(data=data).value()
            except Exception as e:  # a compile or evaluation error: failurePolicy decides
                out.append(f"{c.get('name', '')}: {e}")
                continue
            if isinstance(value, bool):
                out.append(value)
            else:
                out.append(f"{c.get('name', '')}: {value!r} is not a bool")
        return out


# --- the chain --------------------------------------------------------------------------


@dataclass(slots=True)
class _Invocation:
    config: str
    index: int
    hook: Json
    resource: tuple[str, str, str]  # the (group, version, resource) the rule matched

    @property
    def key(self) -> tuple[str, int]:
        return (self.config, self.index)


@dataclass(slots=True)
class AdmissionChain:
    """The mutating webhooks of one in-memory API server. ``reviews`` records every
    AdmissionReview sent (for tests); ``equivalents`` maps a (group, version, resource)
    to others matchPolicy Equivalent may use (the object is sent unchanged but for its
    apiVersion)."""

    store: ApiStore
    services: dict[tuple[str, str, int], str] = field(default_factory=dict)
    equivalents: dict[tuple[str, str, str], list[tuple[str, str, str, str]]] = field(
        default_factory=dict
    )
    reviews: list[Json] = field(default_factory=list)
    _conditions: _Conditions = field(default_factory=_Conditions)
    _sessions: dict[bytes, aiohttp.ClientSession] = field(default_factory=dict)

    def map_service(self, namespace: str, name: str, address: str, port: int = 443) -> None:
        """Send calls for Service ``namespace/name`` on ``port`` to ``address``
        (``https://127.0.0.1:PORT``); the certificate is still checked against
        ``name.namespace.svc``, as the API server checks it."""
        self.services[(namespace, name, port)] = address.rstrip("/")

    async def close(self) -> None:
        for s in self._sessions.values():
            await s.close()
        self._sessions.clear()

    def active(self, plural: str = _MUTATING) -> bool:
        """Whether any configuration is stored (no call is made otherwise)."""
        return any(True for _ in self._configs(plural))

    def _configs(self, plural: str = _MUTATING) -> list[Json]:
        rt = self.store.types.get(("admissionregistration.k8s.io", "v1", plural))
        if rt is None:
            return []
        return sorted(self.store.items(rt), key=lambda c: c["metadata"]["name"])

    async def validate(self, a: Attributes, warnings: list[str]) -> None:
        """The validating webhooks (kube-apiserver v1.28
        ``staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/validating/dispatcher.go``):
        the same matching as the mutating ones, every matching webhook called at once on
        the final object, any patch ignored, and the first refusal (in configuration
        order) refuses the request."""
        if (a.rt.group, a.rt.plural) in _CONFIG_RESOURCES:
            return
        invocations = self._invocations(a, a.object, _VALIDATING)
        results = await asyncio.gather(
            *(self._call(inv, a, a.object, warnings, mutating=False) for inv in invocations),
            return_exceptions=True,
        )
        for r in results:
            if isinstance(r, BaseException):
                raise r

    async def admit(self, a: Attributes, warnings: list[str]) -> Json | None:
        """The object after every matching webhook, or an :class:`ApiStatusError`.
        Warnings the webhooks return are appended to ``warnings`` (also on failure)."""
        if (a.rt.group, a.rt.plural) in _CONFIG_RESOURCES:
            return a.object
        obj = a.object
        invoked: list[tuple[str, int]] = []  # IfNeeded webhooks called so far, in order
        reinvoke: set[tuple[str, int]] = set()
        any_change = False
        for inv in self._invocations(a, obj):
            call = await self._call(inv, a, obj, warnings)
            if call.changed:
                obj = call.obj
                any_change = True
                reinvoke.update(invoked)
            if inv.hook.get("reinvocationPolicy") == "IfNeeded" and inv.key not in invoked:
                invoked.append(inv.key)
        if any_change and reinvoke:
            # One more round: only webhooks that asked for it, were called, and saw the
            # object change after them; none is called for the first time here.
            for inv in self._invocations(a, obj):
                if inv.key not in reinvoke:
                    continue
                reinvoke.discard(inv.key)
                call = await self._call(inv, a, obj, warnings)
                if call.changed:
                    obj = call.obj
        return obj

    def _invocations(
        self, a: Attributes, obj: Json | None, plural: str = _MUTATING
    ) -> list[_Invocation]:
        out: list[_Invocation] = []
        for config in self._configs(plural):
            cname = config["metadata"]["name"]
            for i, raw in enumerate(config.get("webhooks") or ()):
                hook = default_configuration({"webhooks": [raw]}, mutating=plural == _MUTATING)[
                    "webhooks"
                ][0]
                inv = self._should_call(cname, i, hook, a, obj)
                if inv is not None:
                    out.append(inv)
        return out

    def _should_call(
        self, cname: str, i: int, hook: Json, a: Attributes, obj: Json | None
    ) -> _Invocation | None:
        inv: _Invocation | None = None
        for rule in hook.get("rules") or ():
            if _rule_matches(rule, a, a.rt.group, a.rt.version, a.rt.plural):
                inv = _Invocation(cname, i, hook, (a.rt.group, a.rt.version, a.rt.plural))
                break
        if inv is None and hook.get("matchPolicy") == "Equivalent":
            for rule in hook.get("rules") or ():
                for g, v, r, _kind in self.equivalents.get(a.rt.gvr, ()):
                    if _rule_matches(rule, a, g, v, r):
                        inv = _Invocation(cname, i, hook, (g, v, r))
                        break
                if inv is not None:
                    break
        if inv is None:
            return None
        # Selector errors (a namespace that is not there) only count for webhooks whose
        # rules match, as in the API server.
        if not self._namespace_matches(hook, a, obj):
            return None
        sel = _selector(hook, "objectSelector")
        if sel is not None:
            now, old = _labels(obj), _labels(a.old_object)
            if not (
                (now is not None and sel.matches(now)) or (old is not None and sel.matches(old))
            ):
                return None
        conditions = hook.get("matchConditions") or ()
        if conditions:
            data = {
                "object": obj,
                "oldObject": a.old_object,
                "request": self._request(a, inv, obj, "")["request"],
            }
            results = self._conditions.evaluate(conditions, data)
            if any(r is False for r in results):
                return None
            errors = [r for r in results if isinstance(r, str)]
            if errors:
                if hook.get("failurePolicy") == "Ignore":
                    return None
                raise ApiStatusError(
                    403,
                    "Forbidden",
                    f'{a.rt.qualified} "{a.name}" is forbidden: {"; ".join(errors)}',
                    {"name": a.name, "group": a.rt.group, "kind": a.rt.plural},
                )
        return inv

    def _namespace_matches(self, hook: Json, a: Attributes, obj: Json | None) -> bool:
        is_ns_object = (a.rt.group, a.rt.plural) == ("", "namespaces")
        if not a.namespace and not is_ns_object:
            return True  # cluster-scoped requests are never exempted
        sel = _selector(hook, "namespaceSelector")
        if sel is None:
            return True
        if is_ns_object and not a.subresource and a.operation in ("CREATE", "UPDATE"):
            return sel.matches(_labels(obj) or {})
        ns_name = a.name if is_ns_object else a.namespace
        ns = self.store.find(self.store.resource("namespaces"), "", ns_name)
        if ns is None:
            raise ApiStatusError(
                500,
                "InternalError",
                f'Internal error occurred: namespaces "{ns_name}" not found',
            )
        return sel.matches(_labels(ns) or {})

    def _request(self, a: Attributes, inv: _Invocation, obj: Json | None, uid: str) -> Json:
        group, version, resource = inv.resource
        kind = a.kind
        if inv.resource != a.rt.gvr:
            kind = next(
                (g, v, k)
                for g, v, r, k in self.equivalents.get(a.rt.gvr, ())
                if (g, v, r) == inv.resource
            )
        req: Json = {
            "uid": uid,
            "kind": _gvk(*kind),
            "resource": _gvr(group, version, resource),
        }
        if a.subresource:
            req["subResource"] = a.subresource
        req["requestKind"] = _gvk(*a.kind)
        req["requestResource"] = _gvr(a.rt.group, a.rt.version, a.rt.plural)
        if a.subresource:
            req["requestSubResource"] = a.subresource
        if a.name:
            req["name"] = a.name
        if a.namespace:
            req["namespace"] = a.namespace
        req["operation"] = a.operation
        req["userInfo"] = a.user
        sent = obj
        if sent is not None and inv.resource != a.rt.gvr:
            sent = {**sent, "apiVersion": f"{kind[0]}/{kind[1]}" if kind[0] else kind[1]}
        req["object"] = sent
        req["oldObject"] = a.old_object
        req["dryRun"] = a.dry_run
        req["options"] = a.options
        return {"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1", "request": req}

    async def _call(
        self,
        inv: _Invocation,
        a: Attributes,
        obj: Json | None,
        warnings: list[str],
        *,
        mutating: bool = True,
    ) -> _Call:
        hook = inv.hook
        name = str(hook.get("name", ""))
        if a.dry_run and hook.get("sideEffects") not in ("None", "NoneOnDryRun"):
            raise ApiStatusError(
                400, "BadRequest", f'admission webhook "{name}" does not support dry run'
            )
        uid = str(uuid.uuid4())
        review = self._request(a, inv, obj, uid)
        self.reviews.append(review)
        try:
            if "v1" not in (hook.get("admissionReviewVersions") or ()):
                raise _CallFailed(
                    "could not create admission objects: webhook does not accept known "
                    f"AdmissionReview versions {list(hook.get('admissionReviewVersions') or [])}"
                )
            response = await self._post(hook, review)
            result = self._verify(response, uid)
        except _CallFailed as e:
            if hook.get("failurePolicy") == "Ignore":
                return _Call(False, obj)
            message = f'failed calling webhook "{name}": {e}'
            raise ApiStatusError(
                500,
                "InternalError",
                f"Internal error occurred: {message}",
                {"causes": [{"message": message}]},
            ) from None
        for w in result.get("warnings") or ():
            warnings.append(str(w))
        if not result.get("allowed"):
            raise _denied(name, result.get("status"))
        patch = result.get("patch")
        if not patch or not mutating:
            return _Call(False, obj)
        if result.get("patchType") != "JSONPatch":
            if hook.get("failurePolicy") == "Ignore":
                return _Call(False, obj)
            message = (
                f'failed calling webhook "{name}": unsupported patch type '
                f'"{result.get("patchType", "")}"'
            )
            raise ApiStatusError(500, "InternalError", f"Internal error occurred: {message}")
        try:
            ops = orjson.loads(base64.b64decode(patch, validate=True))
            if not isinstance(ops, list):
                raise ValueError("a JSON patch must be an array")
        except (ValueError, orjson.JSONDecodeError) as e:
            if hook.get("failurePolicy") == "Ignore":
                return _Call(False, obj)
            message = (
                f'failed calling webhook "{name}": received undecodable patch in webhook '
                f"response: {e}"
            )
            raise ApiStatusError(
                500, "InternalError", f"Internal error occurred: {message}"
            ) from None
        if not ops:
            return _Call(False, obj)
        if obj is None:
            raise ApiStatusError(
                500,
                "InternalError",
                f'Internal error occurred: admission webhook "{name}" attempted to modify the '
                "object, which is not supported for this operation",
            )
        try:
            patched = jsonpatch.JsonPatch(ops).apply(obj)
        except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException) as e:
            raise ApiStatusError(500, "InternalError", f"Internal error occurred: {e}") from None
        if not isinstance(patched, dict):
            raise ApiStatusError(
                500, "InternalError", "Internal error occurred: the patched object is not an object"
            )
        if not a.subresource:
            # The dispatcher defaults the patched object again: fields still unset get
            # their defaults (a Job given a podFailurePolicy: podReplacementPolicy Failed).
            redefault(a.rt.group, a.rt.plural, patched, self.store.versions.kube)
        return _Call(patched != obj, patched)

    def _target(self, hook: Json, timeout: int) -> tuple[str, str | None]:
        """The URL to POST to, and the name the certificate must carry (None: the URL's
        host)."""
        cc = hook.get("clientConfig") or {}
        if cc.get("url"):
            return str(cc["url"]), None
        svc = cc.get("service") or {}
        ns, name, port = svc.get("namespace", ""), svc.get("name", ""), svc.get("port", 443)
        path = svc.get("path") or ""
        base = self.services.get((ns, name, int(port)))
        if base is None:
            raise _CallFailed(
                f'failed to call webhook: Post "https://{name}.{ns}.svc:{port}{path}'
                f'?timeout={timeout}s": service "{name}" not found'
            )
        return base + path, f"{name}.{ns}.svc"

    def _session(self, ca_bundle: str | None) -> aiohttp.ClientSession:
        key = (ca_bundle or "").encode()
        session = self._sessions.get(key)
        if session is None:
            if ca_bundle:
                try:
                    pem = base64.b64decode(ca_bundle, validate=True).decode()
                    ctx = ssl.create_default_context(cadata=pem)
                except (ValueError, ssl.SSLError) as e:
                    raise _CallFailed(
                        f"could not get REST client: unable to load root certificates: {e}"
                    ) from None
            else:
                ctx = ssl.create_default_context()
            session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx))
            self._sessions[key] = session
        return session

    async def _post(self, hook: Json, review: Json) -> Any:
        timeout = int(hook.get("timeoutSeconds") or _DEFAULT_TIMEOUT)
        url, server_name = self._target(hook, timeout)
        sep = "&" if "?" in url else "?"
        shown = f"{url}{sep}timeout={timeout}s"
        if server_name is not None:
            cc_svc = (hook.get("clientConfig") or {}).get("service") or {}
            shown = (
                f"https://{server_name}:{cc_svc.get('port', 443)}{cc_svc.get('path') or ''}"
                f"{sep}timeout={timeout}s"
            )
        session = self._session((hook.get("clientConfig") or {}).get("caBundle"))
        try:
            async with asyncio.timeout(timeout):
                async with session.post(
                    f"{url}{sep}timeout={timeout}s",
                    data=orjson.dumps(review),
                    headers={"Content-Type": "application/json", "Accept": "application/json"},
                    server_hostname=server_name,
                ) as resp:
                    raw = await resp.read()
                    status = resp.status
        except TimeoutError:
            raise _CallFailed(
                f'failed to call webhook: Post "{shown}": context deadline exceeded'
            ) from None
        except aiohttp.ClientConnectorCertificateError as e:
            raise _CallFailed(
                f'failed to call webhook: Post "{shown}": tls: failed to verify certificate: '
                f"x509: {e.certificate_error}"
            ) from None
        except aiohttp.ClientConnectorError as e:
            raise _CallFailed(
                f'failed to call webhook: Post "{shown}": dial tcp {e.host}:{e.port}: connect: '
                "connection refused"
            ) from None
        except (aiohttp.ClientError, OSError) as e:
            raise _CallFailed(f'failed to call webhook: Post "{shown}": {e}') from None
        try:
            body = orjson.loads(raw) if raw else None
        except orjson.JSONDecodeError:
            body = None
        if not 200 <= status < 300:
            if isinstance(body, dict) and body.get("kind") == "Status":
                raise _CallFailed(f"failed to call webhook: {body.get('message', '')}")
            text = raw.decode(errors="replace")
            raise _CallFailed(
                f'failed to call webhook: an error on the server ("{text}") has prevented the '
                "request from succeeding"
            )
        if body is None:
            raise _CallFailed("received invalid webhook response: the response is not JSON")
        return body

    @staticmethod
    def _verify(body: Any, uid: str) -> Json:
        if not isinstance(body, dict) or body.get("kind") != "AdmissionReview":
            raise _CallFailed(
                "received invalid webhook response: expected webhook response of "
                "admission.k8s.io/v1, Kind=AdmissionReview"
            )
        if body.get("apiVersion") != "admission.k8s.io/v1":
            raise _CallFailed(
                "received invalid webhook response: expected webhook response of "
                f"admission.k8s.io/v1, Kind=AdmissionReview, got {body.get('apiVersion')}, "
                "Kind=AdmissionReview"
            )
        resp = body.get("response")
        if not isinstance(resp, dict):
            raise _CallFailed("received invalid webhook response: webhook response was absent")
        if resp.get("uid") != uid:
            raise _CallFailed(
                f"received invalid webhook response: expected response.uid={uid!r}, "
                f"got {resp.get('uid')!r}"
            )
        if resp.get("patch") and resp.get("patchType") is None:
            raise _CallFailed(
                "received invalid webhook response: webhook returned response.patch but not "
                "response.patchType"
            )
        return resp


class _Rejection(ApiStatusError):
    """A webhook's refusal: its own reason, left out when it gave none."""

    def body(self) -> Json:
        out = super().body()
        if not self.reason:
            out.pop("reason", None)
        return out


def _denied(name: str, status: Any) -> ApiStatusError:
    """A rejection as the API server returns it: the webhook's status, a code of at
    least 400, its message after 'admission webhook "NAME" denied the request'."""
    st: Json = status if isinstance(status, dict) else {}
    code = st.get("code") if isinstance(st.get("code"), int) else 0
    code = code if code >= 400 else 400
    denied = f'admission webhook "{name}" denied the request'
    if st.get("message"):
        message = f"{denied}: {st['message']}"
    elif st.get("reason"):
        message = f"{denied}: {st['reason']}"
    else:
        message = f"{denied} without explanation"
    details = st.get("details") if isinstance(st.get("details"), dict) else None
    return _Rejection(code, str(st.get("reason") or ""), message, details)
