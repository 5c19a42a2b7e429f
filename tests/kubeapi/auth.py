"""Authentication and RBAC authorization for the in-memory API server.

ServiceAccount tokens are minted by the TokenRequest subresource as signed JWTs (RS256,
the claims a v1.28 server writes) and checked on every request: signature, expiry and
that the ServiceAccount still exists with the same uid. Requests by a ServiceAccount are
authorised by the Roles, ClusterRoles and bindings stored in the server, with the RBAC
authorizer's rules (wildcards, resourceNames, subresources, RoleBindings counting in their
own namespace) and its 403 message; what the bootstrap policy grants every authenticated
user (discovery, access reviews about oneself) is allowed too. This is written apart from
``gangplace.kube.rbac`` on purpose: the fake must be able to disagree with the product.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

if TYPE_CHECKING:
    from tests.kubeapi.store import ApiStore

Json = dict[str, Any]

__all__ = [
    "ADMIN",
    "Attributes",
    "Identity",
    "TokenIssuer",
    "authorize",
    "forbidden_message",
]

ISSUER = "https://kubernetes.default.svc"
RBAC = "rbac.authorization.k8s.io"


@dataclass(frozen=True, slots=True)
class Identity:
    user: str
    groups: tuple[str, ...] = ()
    admin: bool = False  # system:masters: every request allowed
    service_account: tuple[str, str] | None = None  # (namespace, name)


ADMIN = Identity("admin", ("system:masters", "system:authenticated"), admin=True)


@dataclass(frozen=True, slots=True)
class Attributes:
    """What a request asks, as the authorizer reads it."""

    verb: str
    group: str
    resource: str
    subresource: str = ""
    namespace: str = ""  # "": cluster scope, or every namespace
    name: str = ""


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass(slots=True)
class TokenIssuer:
    """Mints and checks ServiceAccount tokens (one RSA key per server, made when first
    needed)."""

    key_id: str = "corral-test-key"
    _key: rsa.RSAPrivateKey | None = field(default=None, repr=False)

    @property
    def key(self) -> rsa.RSAPrivateKey:
        if self._key is None:
            self._key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        return self._key

    def mint(
        self,
        namespace: str,
        name: str,
        uid: str,
        *,
        audiences: list[str],
        seconds: int,
        now: float | None = None,
    ) -> tuple[str, int]:
        """A token and its expiry (unix seconds)."""
        now = int(now if now is not None else time.time())
        header = {"alg": "RS256", "kid": self.key_id}
        claims = {
            "aud": audiences,
            "exp": now + seconds,
            "iat": now,
            "iss": ISSUER,
            "kubernetes.io": {"namespace": namespace, "serviceaccount": {"name": name, "uid": uid}},
            "nbf": now,
            "sub": f"system:serviceaccount:{namespace}:{name}",
        }
        signing = ".".join(
            _b64(json.dumps(p, separators=(",", ":")).encode()) for p in (header, claims)
        )
        sig = self.key.sign(signing.encode(), padding.PKCS1v15(), hashes.SHA256())
        return f"{signing}.{_b64(sig)}", now + seconds

    def verify(self, token: str, now: float | None = None) -> Json | None:
        """The claims of a token this issuer minted and that has not expired, else None."""
        if self._key is None:
            return None
        parts = token.split(".")
        if len(parts) != 3:
            return None
        try:
            self._key.public_key().verify(
                _unb64(parts[2]),
                f"{parts[0]}.{parts[1]}".encode(),
                padding.PKCS1v15(),
                hashes.SHA256(),
            )
            claims: Json = json.loads(_unb64(parts[1]))
        except (InvalidSignature, ValueError):
            return None
        t = now if now is not None else time.time()
        if not (claims.get("nbf", 0) <= t < claims.get("exp", 0)):
            return None
        return claims


def identity_of(store: ApiStore, claims: Json) -> Identity | None:
    """The ServiceAccount a token names, while it exists with the uid the token names."""
    info = claims.get("kubernetes.io") or {}
    ns, sa = info.get("namespace"), (info.get("serviceaccount") or {})
    obj = store.find(store.resource("serviceaccounts"), str(ns), str(sa.get("name")))
    if obj is None or obj["metadata"].get("uid") != sa.get("uid"):
        return None
    return Identity(
        f"system:serviceaccount:{ns}:{sa['name']}",
        ("system:serviceaccounts", f"system:serviceaccounts:{ns}", "system:authenticated"),
        service_account=(str(ns), str(sa["name"])),
    )


# --- authorization ----------------------------------------------------------------------


def _subject_matches(subject: Json, who: Identity, binding_ns: str) -> bool:
    kind = subject.get("kind")
    if kind == "ServiceAccount":
        ns = subject.get("namespace") or binding_ns
        return who.service_account == (ns, subject.get("name"))
    if kind == "User":
        return bool(subject.get("name") == who.user)
    if kind == "Group":
        return subject.get("name") in who.groups
    return False


def _subject_text(subject: Json, binding_ns: str) -> str:
    kind = subject.get("kind")
    if kind == "ServiceAccount":
        return f'ServiceAccount "{subject.get("name")}/{subject.get("namespace") or binding_ns}"'
    return f'{kind} "{subject.get("name")}"'


def _rule_allows(rule: Json, a: Attributes) -> bool:
    def has(values: Any, want: str) -> bool:
        return isinstance(values, list) and ("*" in values or want in values)

    if rule.get("nonResourceURLs"):
        return False
    resource = f"{a.resource}/{a.subresource}" if a.subresource else a.resource
    resources = rule.get("resources") or []
    resource_ok = (
        "*" in resources
        or resource in resources
        or (bool(a.subresource) and f"*/{a.subresource}" in resources)
    )
    names = rule.get("resourceNames") or []
    return (
        has(rule.get("verbs"), a.verb)
        and has(rule.get("apiGroups"), a.group)
        and resource_ok
        and (not names or a.name in names)
    )


def _bindings(store: ApiStore, a: Attributes) -> Iterator[tuple[Json, str]]:
    """ClusterRoleBindings, then the RoleBindings of the request's namespace."""
    crbs = store.resource("clusterrolebindings", RBAC)
    for b in store.items(crbs):
        yield b, ""
    if a.namespace:
        rbs = store.resource("rolebindings", RBAC)
        for b in store.items(rbs, a.namespace):
            yield b, a.namespace


def _role_of(store: ApiStore, ref: Json, namespace: str) -> Json | None:
    if ref.get("kind") == "ClusterRole":
        return store.find(store.resource("clusterroles", RBAC), "", str(ref.get("name")))
    if ref.get("kind") == "Role" and namespace:
        return store.find(store.resource("roles", RBAC), namespace, str(ref.get("name")))
    return None


_EVERYONE = frozenset(
    {
        # system:basic-user and system:discovery, bound to system:authenticated
        ("create", "authorization.k8s.io", "selfsubjectaccessreviews"),
        ("create", "authorization.k8s.io", "selfsubjectrulesreviews"),
        ("create", "authentication.k8s.io", "selfsubjectreviews"),
    }
)


def authorize(store: ApiStore, who: Identity, a: Attributes) -> tuple[bool, str]:
    """(allowed, reason) as the Node,RBAC authorizer chain answers."""
    if who.admin:
        return True, ""
    if (a.verb, a.group, a.resource) in _EVERYONE:
        return True, (
            'RBAC: allowed by ClusterRoleBinding "system:basic-user" of ClusterRole '
            '"system:basic-user" to Group "system:authenticated"'
        )
    for binding, ns in _bindings(store, a):
        subjects = [s for s in binding.get("subjects") or () if _subject_matches(s, who, ns)]
        if not subjects:
            continue
        ref = binding.get("roleRef") or {}
        role = _role_of(store, ref, ns)
        if role is None:
            continue
        if any(_rule_allows(r, a) for r in role.get("rules") or ()):
            bname = binding["metadata"]["name"]
            bkind = "RoleBinding" if ns else "ClusterRoleBinding"
            btext = f"{bname}/{ns}" if ns else bname
            return True, (
                f'RBAC: allowed by {bkind} "{btext}" of {ref.get("kind")} "{ref.get("name")}" '
                f"to {_subject_text(subjects[0], ns)}"
            )
    return False, ""


def forbidden_message(who: Identity, a: Attributes) -> tuple[str, Json]:
    """The 403's message and details, as the API server words them."""
    qualified = f"{a.resource}.{a.group}" if a.group else a.resource
    resource = f"{a.resource}/{a.subresource}" if a.subresource else a.resource
    subject = f'{qualified} "{a.name}"' if a.name else qualified
    scope = f'in the namespace "{a.namespace}"' if a.namespace else "at the cluster scope"
    message = (
        f'{subject} is forbidden: User "{who.user}" cannot {a.verb} resource "{resource}" '
        f'in API group "{a.group}" {scope}'
    )
    details: Json = {"name": a.name, "group": a.group, "kind": a.resource}
    return message, details
