"""manifests/ as an admin applies it: rendered with kustomize (manifests/, every overlay,
every combination of components), validated against the Kubernetes 1.28 and latest
OpenAPI schemas, and checked for what the issue asks of each object."""

from __future__ import annotations

import json
import re
import tomllib
from typing import Any

import kubernetes_validate
import pytest
import yaml
from gangplace.kube import rbac

from descheduler.config import DeschedulerConfig
from descheduler.config import parse_config as parse_descheduler_config
from scripts import gen_manifests
from tests.builders.manifests import (
    MANIFESTS,
    OVERLAYS,
    ROOT,
    Obj,
    choices_of,
    config_map,
    find,
    one,
    pod_templates,
    prerender,
    rbac_of,
    render,
    render_choices,
    render_target,
    targets,
)
from webhook.admission.roles import BUILTIN_KINDS
from webhook.config import parse_config as parse_webhook_config

TARGETS = targets()
# Renders every overlay with kustomize (kubectl) and validates against the schemas: seconds.
pytestmark = [pytest.mark.slow, pytest.mark.kubectl]
IDS = [t[0] for t in TARGETS]
NS = rbac.NAMESPACE
# Kubernetes versions whose schemas every object must satisfy: the oldest supported
# and the newest kubernetes-validate knows.
K8S_VERSIONS = ("1.28", kubernetes_validate.latest_version())
CRD_KINDS = {("cert-manager.io/v1", "Issuer"), ("cert-manager.io/v1", "Certificate")}


@pytest.fixture(scope="module", autouse=True)
def _rendered() -> None:
    prerender()


@pytest.fixture(params=TARGETS, ids=IDS)
def objs(request: pytest.FixtureRequest) -> list[Obj]:
    return render_target(request.param[1])


def _canon(o: Any) -> str:
    return json.dumps(o, sort_keys=True)


# --- rendering and schemas --------------------------------------------------------------


def test_overlays_exist_for_each_non_default_choice() -> None:
    names = {p.name for p in OVERLAYS}
    assert {"coscheduling", "yunikorn", "kueue", "cert-manager", "descheduler-deployment"} <= names


def test_default_install_is_volcano_self_signed_cronjob() -> None:
    objs = render(MANIFESTS)
    assert choices_of(objs) == {
        "backend": "volcano",
        "certs": "self-signed",
        "descheduler": "cronjob",
    }
    assert choices_of(objs) == {k: v[0] for k, v in rbac.CHOICES.items()}


def test_every_overlay_makes_the_choices_its_name_says() -> None:
    for path in OVERLAYS:
        chosen = choices_of(render(path))
        names = {*chosen.values(), *(f"{k}-{v}" for k, v in chosen.items())}
        assert path.name in names, (path.name, chosen)


def test_no_object_twice_and_all_in_corral_namespace(objs: list[Obj]) -> None:
    seen = set()
    for o in objs:
        meta = o["metadata"]
        key = (o["apiVersion"], o["kind"], meta.get("namespace"), meta["name"])
        assert key not in seen, key
        seen.add(key)
        cluster_scoped = o["kind"] in (
            "Namespace",
            "ClusterRole",
            "ClusterRoleBinding",
            "MutatingWebhookConfiguration",
        )
        assert meta.get("namespace") == (None if cluster_scoped else NS), key
        assert meta.get("labels", {}).get("app.kubernetes.io/part-of") == "corral", key


def _unique_objects() -> list[Obj]:
    out: dict[str, Obj] = {}
    for _, what in TARGETS:
        for o in render_target(what):
            out.setdefault(_canon(o), o)
    return list(out.values())


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_every_rendered_object_validates_against_the_kubernetes_schemas(version: str) -> None:
    checked = 0
    for o in _unique_objects():
        if (o["apiVersion"], o["kind"]) in CRD_KINDS:
            continue
        try:
            kubernetes_validate.validate(o, version, strict=True)
        except kubernetes_validate.ValidationError as e:
            path = ".".join(str(p) for p in e.path)
            pytest.fail(f"{o['kind']}/{o['metadata']['name']} on {version}: {path}: {e.message}")
        checked += 1
    assert checked >= 15


def test_schema_validation_catches_a_bad_field() -> None:
    # The check above is only worth something if a mistake fails it.
    dep = one(render(MANIFESTS), "Deployment", "corral-webhook")
    dep["spec"]["template"]["spec"]["containers"][0]["readOnlyRootFileSystem"] = True
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(dep, "1.28", strict=True)


# --- RBAC -------------------------------------------------------------------------------


def test_every_api_call_is_attributed() -> None:
    assert rbac.attribution_problems() == []


def test_rbac_of_every_render_is_what_the_attribution_renders(objs: list[Obj]) -> None:
    chosen = choices_of(objs)
    want = []
    for component in rbac.SERVICE_ACCOUNTS:
        want += rbac.rbac_objects(component)
        for item in chosen.items():
            want += rbac.rbac_objects(component, item)
    got = sorted(_canon(o) for o in rbac_of(objs))
    assert got == sorted(_canon(o) for o in want), (
        "the RBAC in manifests/ differs from gangplace.kube.rbac: run `make manifests`"
    )


def test_generated_files_are_up_to_date() -> None:
    files = gen_manifests.generated()
    stale = [str(p.relative_to(ROOT)) for p, text in files.items() if p.read_text() != text]
    assert not stale, f"out of date, run `make manifests`: {stale}"


def test_every_choice_component_includes_its_generated_rbac() -> None:
    for choice, values in rbac.CHOICES.items():
        for value in values:
            k = yaml.safe_load(
                (MANIFESTS / f"components/{choice}-{value}/kustomization.yaml").read_text()
            )
            assert "rbac.yaml" in k.get("resources", []), f"{choice}-{value}"
    base = yaml.safe_load((MANIFESTS / "base/kustomization.yaml").read_text())
    assert "rbac.yaml" in base["resources"]


def test_no_wildcards_and_every_binding_is_whole(objs: list[Obj]) -> None:
    roles = {
        (o["kind"], o["metadata"]["name"]) for o in objs if o["kind"] in ("Role", "ClusterRole")
    }
    accounts = {o["metadata"]["name"] for o in find(objs, "ServiceAccount")}
    for o in rbac_of(objs):
        for rule in o.get("rules", []):
            for field in ("apiGroups", "resources", "verbs", "resourceNames", "nonResourceURLs"):
                assert "*" not in rule.get(field, []), (o["metadata"]["name"], rule)
            assert rule["verbs"], rule
            assert not {"escalate", "bind", "impersonate"} & set(rule["verbs"]), rule
        if o["kind"].endswith("Binding"):
            ref = o["roleRef"]
            assert (ref["kind"], ref["name"]) in roles, o["metadata"]["name"]
            for s in o["subjects"]:
                assert s["kind"] == "ServiceAccount" and s["namespace"] == NS
                assert s["name"] in accounts


def test_namespaced_grants_stay_in_corral_namespace(objs: list[Obj]) -> None:
    for o in find(objs, "Role") + find(objs, "RoleBinding"):
        assert o["metadata"]["namespace"] == NS


def test_secrets_are_never_readable_cluster_wide(objs: list[Obj]) -> None:
    for o in find(objs, "ClusterRole"):
        for rule in o["rules"]:
            if "" in rule["apiGroups"]:
                assert "secrets" not in rule["resources"], o["metadata"]["name"]


# --- command lines ----------------------------------------------------------------------

# Flags the manifests pass that the components do not have yet: (program, subcommand,
# flag) -> the work that adds it. Each is checked below to be missing still.
PENDING_FLAGS: dict[tuple[str, str, str], str] = {}


def _parser(program: str) -> Any:
    if program == "corral-webhook":
        from webhook.cli import build_parser
    elif program == "corral-descheduler":
        from descheduler.cli import build_parser
    else:
        raise AssertionError(f"a container runs {program!r}, not a corral command")
    return build_parser()


def _subparser(program: str, sub: str) -> Any:
    parser = _parser(program)
    action = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    return action.choices[sub]


def _known(program: str, sub: str, flag: str) -> bool:
    return flag in _subparser(program, sub)._option_string_actions


def _command_lines(objs: list[Obj]) -> list[tuple[str, list[str]]]:
    out = []
    for workload, tpl in pod_templates(objs):
        for c in tpl["spec"]["containers"]:
            where = f"{workload['kind']}/{workload['metadata']['name']}/{c['name']}"
            out.append((where, [*c.get("command", []), *c.get("args", [])]))
    return out


def _strip_pending(argv: list[str]) -> tuple[list[str], list[str]]:
    program, sub = argv[0], argv[1]
    pending = [f for (p, s, f) in PENDING_FLAGS if p == program and s == sub]
    kept, dropped = [], []
    for a in argv[1:]:
        flag = a.split("=", 1)[0]
        if flag in pending and not _known(program, sub, flag):
            dropped.append(flag)
        else:
            kept.append(a)
    return kept, dropped


def test_every_container_command_line_parses(
    objs: list[Obj], capsys: pytest.CaptureFixture[str]
) -> None:
    lines = _command_lines(objs)
    assert len(lines) == 2  # the webhook and the descheduler
    for where, argv in lines:
        assert argv and argv[0] in ("corral-webhook", "corral-descheduler"), where
        kept, _ = _strip_pending(argv)
        try:
            _parser(argv[0]).parse_args(kept)
        except SystemExit:
            pytest.fail(f"{where}: {argv[0]} refuses {kept}: {capsys.readouterr().err}")


def test_the_flag_check_can_fail(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        _parser("corral-webhook").parse_args(["serve", "--tls-cert"])
    with pytest.raises(SystemExit):
        _parser("corral-descheduler").parse_args(["run", "--once", "--interval=10m"])


def test_pending_flags_are_the_ones_the_manifests_use() -> None:
    used: set[tuple[str, str, str]] = set()
    for _, what in TARGETS:
        for _, argv in _command_lines(render_target(what)):
            for a in argv[2:]:
                if a.startswith("--"):
                    used.add((argv[0], argv[1], a.split("=", 1)[0]))
    stale = set(PENDING_FLAGS) - used
    assert not stale, f"PENDING_FLAGS lists flags no manifest uses: {sorted(stale)}"


def test_pending_flags_do_not_exist_yet() -> None:
    # Each pending flag is still missing; when one lands, this fails: remove it from
    # PENDING_FLAGS. (One test over the list, not one per flag: an empty list is no skip.)
    landed = [" ".join(k) for k in PENDING_FLAGS if _known(*k)]
    assert not landed, f"these flags exist now; remove them from PENDING_FLAGS: {landed}"


def _flag(argv: list[str], flag: str) -> str | None:
    for a in argv:
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
    return None


def test_named_objects_in_flags_are_the_ones_rbac_allows(objs: list[Obj]) -> None:
    lines = dict(_command_lines(objs))
    webhook = lines["Deployment/corral-webhook/webhook"]
    mwc = one(objs, "MutatingWebhookConfiguration")
    if "--self-signed" in webhook:
        assert _flag(webhook, "--webhook-config-name") == mwc["metadata"]["name"]
        assert _flag(webhook, "--webhook-config-name") == rbac.WEBHOOK_CONFIGURATION
        assert _flag(webhook, "--tls-secret-name") == rbac.WEBHOOK_TLS_SECRET
    else:
        assert one(objs, "Certificate")["spec"]["secretName"] == rbac.WEBHOOK_TLS_SECRET
    assert (
        _flag(webhook, "--service-name")
        == one(objs, "Service", "corral-webhook")["metadata"]["name"]
    )
    for where, argv in lines.items():
        if where.startswith("Deployment/corral-descheduler"):
            assert _flag(argv, "--lease-name") == rbac.DESCHEDULER_LEASE
            assert _flag(argv, "--lease-namespace") == "$(POD_NAMESPACE)"


def test_files_named_in_flags_are_mounted(objs: list[Obj]) -> None:
    cms = {o["metadata"]["name"]: o for o in find(objs, "ConfigMap")}
    cert_secrets = {o["spec"]["secretName"]: o for o in find(objs, "Certificate")}
    for workload, tpl in pod_templates(objs):
        spec = tpl["spec"]
        volumes = {v["name"]: v for v in spec["volumes"]}
        for c in spec["containers"]:
            argv = c.get("args", [])
            for flag in ("--config", "--tls-cert-file", "--tls-key-file"):
                path = _flag(argv, flag)
                if path is None:
                    continue
                mount = next(
                    m
                    for m in c["volumeMounts"]
                    if path.startswith(m["mountPath"].rstrip("/") + "/")
                )
                key = path[len(mount["mountPath"].rstrip("/")) + 1 :]
                vol = volumes[mount["name"]]
                if "configMap" in vol:
                    assert key in cms[vol["configMap"]["name"]]["data"], (workload["kind"], path)
                else:
                    secret = vol["secret"]["secretName"]
                    assert secret in cert_secrets, f"{secret} is made by nothing in the render"
                    assert key in ("tls.crt", "tls.key")  # what cert-manager writes


def test_self_signed_and_cert_files_exclude_each_other(objs: list[Obj]) -> None:
    argv = dict(_command_lines(objs))["Deployment/corral-webhook/webhook"]
    files = _flag(argv, "--tls-cert-file") is not None
    assert files != ("--self-signed" in argv)
    assert files == (choices_of(objs)["certs"] == "cert-manager")


# --- the webhook ------------------------------------------------------------------------


def test_webhook_deployment(objs: list[Obj]) -> None:
    dep = one(objs, "Deployment", "corral-webhook")
    spec = dep["spec"]
    assert spec["replicas"] == 2
    tpl = spec["template"]
    labels = tpl["metadata"]["labels"]
    assert all(labels.get(k) == v for k, v in spec["selector"]["matchLabels"].items())
    anti = tpl["spec"]["affinity"]["podAntiAffinity"]
    terms = [t["podAffinityTerm"] for t in anti["preferredDuringSchedulingIgnoredDuringExecution"]]
    assert any(
        t["topologyKey"] == "kubernetes.io/hostname"
        and t["labelSelector"]["matchLabels"] == spec["selector"]["matchLabels"]
        for t in terms
    )
    (c,) = tpl["spec"]["containers"]
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert _flag(c["args"], "--port") == str(ports["https"])
    for probe, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
        get = c[probe]["httpGet"]
        assert (get["path"], get["port"], get["scheme"]) == (path, "https", "HTTPS")
    assert tpl["spec"]["serviceAccountName"] == rbac.SERVICE_ACCOUNTS["webhook"]
    # The pod outlives its shutdown delay and drain.
    delay = float(_flag(c["args"], "--shutdown-delay") or 5)
    drain = float(_flag(c["args"], "--shutdown-timeout") or 25)
    assert tpl["spec"]["terminationGracePeriodSeconds"] > delay + drain


def test_webhook_routes_exist_in_the_server() -> None:
    from webhook.config import WebhookConfig
    from webhook.server import init_app

    app = init_app(WebhookConfig())
    routes = {(r.method, r.resource.canonical) for r in app.router.routes() if r.resource}
    assert {
        ("POST", "/mutate"),
        ("GET", "/healthz"),
        ("GET", "/readyz"),
        ("GET", "/metrics"),
    } <= routes


def test_pdb_and_service_select_the_webhook_pods(objs: list[Obj]) -> None:
    dep = one(objs, "Deployment", "corral-webhook")
    pod_labels = dep["spec"]["template"]["metadata"]["labels"]
    pdb = one(objs, "PodDisruptionBudget", "corral-webhook")
    assert pdb["spec"]["minAvailable"] == 1 < dep["spec"]["replicas"]
    assert all(pod_labels.get(k) == v for k, v in pdb["spec"]["selector"]["matchLabels"].items())
    svc = one(objs, "Service", "corral-webhook")
    assert all(pod_labels.get(k) == v for k, v in svc["spec"]["selector"].items())
    (port,) = svc["spec"]["ports"]
    assert port["targetPort"] == "https" and port["port"] == 443


def _table_rules() -> set[tuple[str, str, str]]:
    out = {("", "v1", "pods")}
    for k in BUILTIN_KINDS:
        for v in k.versions:
            out.add((k.group, v, k.kind.lower() + "s"))
    return out


def _rule_set(wh: Obj, ops: list[str]) -> set[tuple[str, str, str]]:
    got = set()
    for rule in wh["rules"]:
        assert rule["operations"] == ops and rule["scope"] == "Namespaced"
        for g in rule["apiGroups"]:
            for v in rule["apiVersions"]:
                for r in rule["resources"]:
                    got.add((g, v, r))
    return got


def test_mutating_webhook_configuration(objs: list[Obj]) -> None:
    mwc = one(objs, "MutatingWebhookConfiguration", rbac.WEBHOOK_CONFIGURATION)
    creates, updates = mwc["webhooks"]
    assert creates["name"] == "gangs.corral.dev"
    assert updates["name"] == "workload-updates.corral.dev"
    svc = one(objs, "Service", "corral-webhook")
    for wh in (creates, updates):
        assert wh["admissionReviewVersions"] == ["v1"]
        assert wh["sideEffects"] == "NoneOnDryRun"
        assert 1 <= wh["timeoutSeconds"] <= 5
        ref = wh["clientConfig"]["service"]
        assert (ref["name"], ref["namespace"], ref["path"], ref["port"]) == (
            svc["metadata"]["name"],
            svc["metadata"]["namespace"],
            "/mutate",
            svc["spec"]["ports"][0]["port"],
        )
        exprs = {e["key"]: e for e in wh["namespaceSelector"]["matchExpressions"]}
        assert exprs["corral.dev/gang-scheduling"]["operator"] == "In"
        assert exprs["corral.dev/gang-scheduling"]["values"] == ["enabled"]
        excluded = exprs["kubernetes.io/metadata.name"]
        assert excluded["operator"] == "NotIn" and {"kube-system", NS} <= set(excluded["values"])
        skip = {e["key"]: e for e in wh["objectSelector"]["matchExpressions"]}["corral.dev/skip"]
        assert skip["operator"] == "NotIn" and "true" in skip["values"]
        (cond,) = wh["matchConditions"]
        assert "'corral.dev/skip'" in cond["expression"]
    # Both see the same objects: only the operations and the failure policy differ.
    same = ("namespaceSelector", "objectSelector", "matchConditions", "clientConfig")
    assert {k: creates[k] for k in same} == {k: updates[k] for k in same}
    assert creates["reinvocationPolicy"] == "IfNeeded"
    assert updates["reinvocationPolicy"] == "Never"  # an UPDATE is never patched
    # CREATE of pods and workloads may be refused while the webhook is down (Fail); the
    # UPDATE of a workload (Kueue's or the descheduler's suspend and resume) never is.
    assert creates["failurePolicy"] in ("Fail", "Ignore")
    assert updates["failurePolicy"] == "Ignore"
    table = _table_rules()
    assert _rule_set(creates, ["CREATE"]) == table, "pods plus the webhook's workload table"
    assert _rule_set(updates, ["UPDATE"]) == table - {("", "v1", "pods")}, (
        "the UPDATE of every kind of the webhook's workload table, and not of pods"
    )


def test_failure_policy_is_explained_where_it_is_set() -> None:
    text = (MANIFESTS / "base/mutatingwebhookconfiguration.yaml").read_text()
    head = text.split("apiVersion:")[0]
    assert "failurePolicy: Fail" in head and "components/fail-open" in head
    assert "kubectl patch mutatingwebhookconfiguration" in head
    docs = (ROOT / "docs/failure-modes.md").read_text()
    assert "failurePolicy" in docs and "fail-open" in docs


def test_fail_open_component_switches_the_policy() -> None:
    default = one(render(MANIFESTS), "MutatingWebhookConfiguration")
    assert default["webhooks"][0]["failurePolicy"] == "Fail"
    chosen = {k: v[0] for k, v in rbac.CHOICES.items()}
    opened = one(render_choices(chosen, ("fail-open",)), "MutatingWebhookConfiguration")
    assert opened["webhooks"][0]["failurePolicy"] == "Ignore"


def test_webhook_config_file_loads_and_names_its_backend(objs: list[Obj]) -> None:
    text = config_map(objs, "corral-webhook-config")["data"]["webhook.yaml"]
    cfg = parse_webhook_config(yaml.safe_load(text), "webhook.yaml")
    assert cfg.backend.value == choices_of(objs)["backend"]
    assert cfg.own_namespace == NS


def test_cert_manager_objects(objs: list[Obj]) -> None:
    certs = find(objs, "Certificate")
    mwc = one(objs, "MutatingWebhookConfiguration")
    annotations = mwc["metadata"].get("annotations", {})
    if not certs:
        assert "cert-manager.io/inject-ca-from" not in annotations
        assert not find(objs, "Issuer")
        return
    (cert,) = certs
    spec = cert["spec"]
    assert cert["apiVersion"] == "cert-manager.io/v1"
    assert set(spec) <= {
        "secretName",
        "commonName",
        "dnsNames",
        "duration",
        "renewBefore",
        "privateKey",
        "usages",
        "issuerRef",
    }
    assert annotations["cert-manager.io/inject-ca-from"] == f"{NS}/{cert['metadata']['name']}"
    svc = one(objs, "Service", "corral-webhook")["metadata"]
    assert f"{svc['name']}.{svc['namespace']}.svc" in spec["dnsNames"]
    issuer = one(objs, "Issuer", spec["issuerRef"]["name"])
    assert spec["issuerRef"]["kind"] == "Issuer" and spec["issuerRef"]["group"] == "cert-manager.io"
    assert issuer["apiVersion"] == "cert-manager.io/v1" and issuer["spec"] == {"selfSigned": {}}
    for d in ("duration", "renewBefore"):
        assert re.fullmatch(r"\d+h", spec[d]), d
    assert int(spec["renewBefore"][:-1]) < int(spec["duration"][:-1])
    assert "server auth" in spec["usages"]


# --- the descheduler --------------------------------------------------------------------


def test_descheduler_runs_one_way(objs: list[Obj]) -> None:
    cron = find(objs, "CronJob", "corral-descheduler")
    dep = find(objs, "Deployment", "corral-descheduler")
    assert len(cron) + len(dep) == 1
    argv = dict(_command_lines(objs))
    if cron:
        spec = cron[0]["spec"]
        assert spec["concurrencyPolicy"] == "Forbid"
        job = spec["jobTemplate"]["spec"]
        assert job["backoffLimit"] == 0
        assert job["template"]["spec"]["restartPolicy"] == "Never"
        assert "--once" in argv["CronJob/corral-descheduler/descheduler"]
    else:
        args = argv["Deployment/corral-descheduler/descheduler"]
        assert _flag(args, "--interval")
        c = dep[0]["spec"]["template"]["spec"]["containers"][0]
        port = {p["name"]: p["containerPort"] for p in c["ports"]}["metrics"]
        assert _flag(args, "--metrics-port") == str(port)
        assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"


def test_descheduler_config_is_complete_and_starts_in_dry_run(objs: list[Obj]) -> None:
    text = config_map(objs, "corral-descheduler-config")["data"]["descheduler.yaml"]
    raw = yaml.safe_load(text)
    cfg = parse_descheduler_config(raw, "descheduler.yaml")
    assert cfg.runner.dry_run is True
    assert cfg.model_copy(update={"runner": DeschedulerConfig().runner}) == DeschedulerConfig()
    for section, field in DeschedulerConfig.model_fields.items():
        sub = field.annotation
        if isinstance(sub, type) and hasattr(sub, "model_fields"):
            assert set(raw[section]) == set(sub.model_fields), section


# --- every pod: hardened ----------------------------------------------------------------


def test_pods_meet_the_restricted_profile_and_have_limits(objs: list[Obj]) -> None:
    namespace = one(objs, "Namespace", NS)
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    templates = list(pod_templates(objs))
    assert len(templates) == 2
    for workload, tpl in templates:
        spec = tpl["spec"]
        what = workload["metadata"]["name"]
        psc = spec["securityContext"]
        assert psc["runAsNonRoot"] is True and psc["runAsUser"] != 0, what
        assert psc["seccompProfile"]["type"] == "RuntimeDefault", what
        for forbidden in ("hostNetwork", "hostPID", "hostIPC"):
            assert not spec.get(forbidden), what
        for v in spec.get("volumes", []):
            assert set(v) - {"name"} <= {"configMap", "secret", "emptyDir", "projected"}, v
        assert spec.get("automountServiceAccountToken", True) is True  # it talks to the API
        for c in spec["containers"] + spec.get("initContainers", []):
            sc = c["securityContext"]
            assert sc["runAsNonRoot"] is True, what
            assert sc["readOnlyRootFilesystem"] is True, what
            assert sc["allowPrivilegeEscalation"] is False, what
            assert sc["capabilities"] == {"drop": ["ALL"]}, what
            assert sc["seccompProfile"]["type"] == "RuntimeDefault", what
            assert not sc.get("privileged"), what
            res = c["resources"]
            assert {"cpu", "memory"} <= set(res["requests"]) and {"cpu", "memory"} <= set(
                res["limits"]
            ), what
            mounts = {m["mountPath"] for m in c["volumeMounts"]}
            assert "/tmp" in mounts, f"{what}: a read-only root needs a writable /tmp"


def test_images_are_this_version() -> None:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    for _, what in TARGETS:
        for _, tpl in pod_templates(render_target(what)):
            for c in tpl["spec"]["containers"]:
                assert c["image"] == f"corral:{version}", c["image"]
