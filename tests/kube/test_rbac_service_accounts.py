"""The webhook and the descheduler as their own ServiceAccounts: the ServiceAccounts, Roles
and bindings that manifests/ renders are loaded into the in-memory API server, a token is
minted for each (TokenRequest), and the components run with it. The server authorises
every request by those Roles, so a run that succeeds with no request refused proves the
rendered RBAC is enough; a call outside a component's role gets the real 403."""

from __future__ import annotations

import copy
import io
import json

import pytest
from gangplace.kube import KubeClient, rbac
from gangplace.kube.client import ApiError
from kubernetes_asyncio import client as k8s

from descheduler import DeschedulerConfig
from descheduler.running.process import RunOptions, run_descheduler
from tests.builders.manifests import render_choices
from tests.descheduler.test_run_live import NOW, expected_plan, two_gang_items
from tests.kube.test_rbac import exercise_webhook
from tests.kubeapi import ApiServer
from tests.kubeapi import objects as o

# The components under their own ServiceAccounts, end to end: not in `make test-fast`.
# The RBAC comes from manifests/, rendered with kubectl kustomize.
pytestmark = [pytest.mark.scenario, pytest.mark.kubectl]

NS = rbac.NAMESPACE
RBAC_KINDS = frozenset(
    {"Namespace", "ServiceAccount", "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"}
)


async def install(api: ApiServer, **choices: str) -> dict[str, str]:
    """Load the rendered install's identities and RBAC; a token per component, minted by
    the TokenRequest API as a user of the install would."""
    chosen = {c: choices.get(c, values[0]) for c, values in rbac.CHOICES.items()}
    objs = [x for x in render_choices(chosen) if x["kind"] in RBAC_KINDS]
    assert {x["kind"] for x in objs} == RBAC_KINDS
    api.store.load(copy.deepcopy(objs))
    tokens = {}
    async with k8s.ApiClient(api.configuration()) as c:
        core = k8s.CoreV1Api(c)
        for component, account in rbac.SERVICE_ACCOUNTS.items():
            request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest"}
            answer = await core.create_namespaced_service_account_token(account, NS, request)
            tokens[component] = answer.status.token
    return tokens


def refused(api: ApiServer) -> list[str]:
    return [f"{r.method} {r.path}" for r in api.denied]


async def test_the_descheduler_runs_as_its_service_account(api: ApiServer) -> None:
    """A whole leader-elected run: informers, the Lease, the move ledger, PodGroup marks,
    evictions and Events, as corral-descheduler."""
    tokens = await install(api, descheduler="deployment")
    items = two_gang_items()
    want = expected_plan(items)
    api.store.load(copy.deepcopy(items))
    out = io.StringIO()
    opts = RunOptions(
        once=True,
        output="json",
        lease_namespace=NS,
        lease_name=rbac.DESCHEDULER_LEASE,
        # Long enough that a loaded machine never loses the Lease mid-run.
        lease_duration=15.0,
        renew_deadline=10.0,
        retry_period=0.05,
        backoff_initial=0.01,
        sync_timeout=5.0,
    )
    code = await run_descheduler(
        opts,
        DeschedulerConfig(),
        client=api.client("descheduler", token=tokens[rbac.DESCHEDULER]),
        clock=lambda: NOW,
        out=out,
        install_signals=False,
    )
    assert code == 0, out.getvalue()
    assert refused(api) == []
    doc = json.loads(out.getvalue())
    assert doc["evictions"] == want.evictions and want.evictions
    mine = [r for r in api.log if r.authorization == f"Bearer {tokens[rbac.DESCHEDULER]}"]
    assert {r.method for r in mine} >= {"GET", "POST", "PUT", "PATCH"}
    assert any(r.path.endswith("/eviction") for r in mine)
    assert any("/leases/" in r.path for r in mine)


async def test_the_descheduler_is_refused_what_it_is_not_given(api: ApiServer) -> None:
    tokens = await install(api, descheduler="cronjob")
    api.store.load([o.namespace("ml"), o.node("n1"), o.pod("p", "ml", node="n1")])
    kube = api.client("descheduler", token=tokens[rbac.DESCHEDULER])
    user = f"system:serviceaccount:{NS}:corral-descheduler"
    # A CronJob install elects no leader: no Lease for it.
    with pytest.raises(ApiError) as err:
        await kube.request("GET", f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/x")
    assert err.value.status == 403
    assert err.value.message == (
        f'leases.coordination.k8s.io "x" is forbidden: User "{user}" cannot get resource '
        f'"leases" in API group "coordination.k8s.io" in the namespace "{NS}"'
    )
    # It evicts; it never deletes a pod itself.
    with pytest.raises(ApiError) as err:
        await kube.request("DELETE", "/api/v1/namespaces/ml/pods/p")
    assert err.value.status == 403
    assert err.value.message == (
        f'pods "p" is forbidden: User "{user}" cannot delete resource "pods" in API group "" '
        'in the namespace "ml"'
    )
    assert len(refused(api)) == 2
    assert api.store.find(api.store.resource("pods"), "ml", "p") is not None


@pytest.mark.parametrize("backend", ["volcano", "coscheduling"])
async def test_the_webhook_runs_as_its_service_account(api: ApiServer, backend: str) -> None:
    """The webhook's informers, PodGroups (made, found made, joined by a bare pod, owners
    read) and its self-signed certificate (Secret, caBundle), as corral-webhook."""
    from gangplace.kube.resources import COSCHED_PODGROUPS, VOLCANO_PODGROUPS

    tokens = await install(api, backend=backend)
    kube: KubeClient = api.client("webhook", token=tokens[rbac.WEBHOOK])
    await exercise_webhook(api, kube, backend)
    assert refused(api) == []
    mwc_now = api.store.get(
        api.store.resource("mutatingwebhookconfigurations", "admissionregistration.k8s.io"),
        "",
        rbac.WEBHOOK_CONFIGURATION,
    )
    assert mwc_now["webhooks"][0]["clientConfig"].get("caBundle")
    # Outside its role: evicting, and the other backend's PodGroups.
    user = f"system:serviceaccount:{NS}:corral-webhook"
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "a"}}
    with pytest.raises(ApiError) as err:
        await kube.request("POST", "/api/v1/namespaces/ml/pods/a/eviction", body=eviction)
    assert err.value.status == 403
    assert err.value.message == (
        f'pods "a" is forbidden: User "{user}" cannot create resource "pods/eviction" in API '
        'group "" in the namespace "ml"'
    )
    other = COSCHED_PODGROUPS if backend == "volcano" else VOLCANO_PODGROUPS
    with pytest.raises(ApiError) as err:
        await kube.request("GET", other.path("ml"))
    assert err.value.status == 403 and "cannot list resource" in err.value.message


async def test_a_token_outlives_its_service_account_only_as_a_401(api: ApiServer) -> None:
    tokens = await install(api)
    kube = api.client("descheduler", token=tokens[rbac.DESCHEDULER])
    assert (await kube.request("GET", "/api/v1/nodes"))["kind"] == "NodeList"
    sa = api.store.resource("serviceaccounts")
    api.store.delete(sa, NS, rbac.SERVICE_ACCOUNTS[rbac.DESCHEDULER])
    with pytest.raises(ApiError) as err:
        await kube.request("GET", "/api/v1/nodes")
    assert err.value.status == 401
