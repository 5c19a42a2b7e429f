"""The recipes the docs give an admin, run as the docs write them: the kustomizations
(docs/configuration.md's config override, docs/install.md's own choice of components)
rendered with kustomize; docs/upgrade.md's prune lists checked against every kind any
install renders, and its upgrade run with a real kubectl against the in-memory API
server; the README's quick install in an order that never labels a namespace before the
webhook runs; cert-manager named with the version to install."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.builders.manifests import (
    MANIFESTS,
    ROOT,
    Obj,
    config_map,
    find,
    kustomize_command,
    one,
    render_target,
    targets,
)
from tests.kubeapi import ApiServer, ResourceType, Versions
from tests.kubeapi.__main__ import write_kubeconfig
from tests.kubeapi.tls import server_tls

# kustomize (kubectl's own) renders every recipe here.
pytestmark = [pytest.mark.kubectl, pytest.mark.slow]

DOCS = ROOT / "docs"
LABEL = "app.kubernetes.io/part-of=corral"


def read(name: str) -> str:
    return (DOCS / name).read_text()


def blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", text, flags=re.S)


def recipe_files(text: str) -> dict[str, str]:
    """The YAML blocks that open with ``# my-corral/...``: path -> content."""
    out: dict[str, str] = {}
    for b in blocks(text, "yaml"):
        first = b.splitlines()[0]
        if m := re.fullmatch(r"# (my-corral/\S+)", first.strip()):
            out[m.group(1)] = b
    return out


def build(folder: Path) -> list[Obj]:
    proc = subprocess.run(
        [*kustomize_command(), str(folder)], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, f"the recipe does not render:\n{proc.stderr}"
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


def lay_out(tmp: Path, files: dict[str, str]) -> Path:
    """The recipe's files beside a copy of corral at ``../corral``, as the docs say."""
    (tmp / "corral").symlink_to(ROOT, target_is_directory=True)
    for rel, content in files.items():
        path = tmp / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    return tmp / "my-corral"


# --- docs/configuration.md: replacing the config files ----------------------------------


def test_the_config_override_recipe_replaces_both_files(tmp_path: Path) -> None:
    files = recipe_files(read("configuration.md"))
    assert "my-corral/kustomization.yaml" in files
    component = next(p for p in files if p != "my-corral/kustomization.yaml")
    # The admin's files, beside the generator that names them.
    mine = Path(component).parent
    webhook = "backend: volcano\ninfeasible: deny\n"
    descheduler = "runner:\n  dry_run: false\n"
    files[f"{mine}/webhook.yaml"] = webhook
    files[f"{mine}/descheduler.yaml"] = descheduler
    objs = build(lay_out(tmp_path, files))

    assert config_map(objs, "corral-webhook-config")["data"] == {"webhook.yaml": webhook}
    assert config_map(objs, "corral-descheduler-config")["data"] == {
        "descheduler.yaml": descheduler
    }
    # They keep the label the upgrade's `kubectl apply -l` selects.
    key, value = LABEL.split("=")
    for cm in find(objs, "ConfigMap"):
        assert cm["metadata"]["labels"][key] == value
    # Both workloads mount the replaced ConfigMaps (the names carry the new hash).
    names = {o["metadata"]["name"] for o in find(objs, "ConfigMap")}
    deploy = one(objs, "Deployment", "corral-webhook")
    mounted = {
        v["configMap"]["name"]
        for v in deploy["spec"]["template"]["spec"]["volumes"]
        if "configMap" in v
    }
    assert mounted and mounted <= names
    # Everything else is the default install's.
    default = render_target(MANIFESTS)
    assert sorted((o["kind"], o["metadata"]["name"]) for o in objs if o["kind"] != "ConfigMap") == (
        sorted((o["kind"], o["metadata"]["name"]) for o in default if o["kind"] != "ConfigMap")
    )


def test_a_generator_in_the_parent_is_what_kustomize_refuses(tmp_path: Path) -> None:
    """Why the recipe is a component: kustomize runs a kustomization's own generators
    before its components (api/internal/target/kusttarget.go, accumulateTarget), so a
    replace in the parent finds no ConfigMap the backend component makes."""
    files = recipe_files(read("configuration.md"))
    component = next(p for p in files if p != "my-corral/kustomization.yaml")
    parent = yaml.safe_load(files["my-corral/kustomization.yaml"])
    parent["components"] = [c for c in parent["components"] if c.startswith("../corral")]
    parent["configMapGenerator"] = yaml.safe_load(files[component])["configMapGenerator"]
    folder = lay_out(tmp_path, {"my-corral/kustomization.yaml": yaml.safe_dump(parent)})
    (folder / "webhook.yaml").write_text("backend: volcano\n")
    (folder / "descheduler.yaml").write_text("{}\n")
    proc = subprocess.run(
        [*kustomize_command(), str(folder)], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode != 0
    assert "corral-webhook-config" in proc.stderr and "cannot merge or replace" in proc.stderr


# --- docs/install.md: an install of one's own -------------------------------------------


def test_the_own_kustomization_of_install_md_renders(tmp_path: Path) -> None:
    files = recipe_files(read("install.md"))
    doc = yaml.safe_load(files["my-corral/kustomization.yaml"])
    objs = build(lay_out(tmp_path, files))
    chosen = {c.rsplit("/", 1)[1] for c in doc["components"]}
    webhook = yaml.safe_load(config_map(objs, "corral-webhook-config")["data"]["webhook.yaml"])
    assert f"backend-{webhook['backend']}" in chosen
    assert bool(find(objs, "Certificate")) == ("certs-cert-manager" in chosen)
    assert bool(find(objs, "CronJob")) == ("descheduler-cronjob" in chosen)
    [image] = doc["images"]
    for o in find(objs, "Deployment"):
        for c in o["spec"]["template"]["spec"]["containers"]:
            assert c["image"] == f"{image['newName']}:{image['newTag']}"


# --- docs/upgrade.md: the prune lists ---------------------------------------------------


def _prune_blocks() -> list[str]:
    return [b for b in blocks(read("upgrade.md"), "sh") if "--prune-allowlist" in b]


def allowlists() -> tuple[set[str], set[str]]:
    """The kinds of the upgrade command, and those added with cert-manager."""
    base, extra = _prune_blocks()
    kinds = [set(re.findall(r"--prune-allowlist=(\S+)", b)) for b in (base, extra)]
    return kinds[0], kinds[1]


def gvk(o: Obj) -> str:
    api = o["apiVersion"] if "/" in o["apiVersion"] else f"core/{o['apiVersion']}"
    return f"{api}/{o['kind']}"


def test_the_prune_lists_name_every_kind_an_install_renders() -> None:
    base, cert_manager = allowlists()
    seen: set[str] = set()
    for name, what in targets():
        objs = render_target(what)
        kinds = {gvk(o) for o in objs}
        seen |= kinds
        allowed = base | (cert_manager if find(objs, "Certificate") else set())
        assert kinds <= allowed, f"{name}: {sorted(kinds - allowed)} would never be pruned"
        for o in objs:
            key, value = LABEL.split("=")
            assert o["metadata"].get("labels", {}).get(key) == value, (
                f"{name}: {gvk(o)} {o['metadata']['name']} lacks {LABEL}: "
                "`kubectl apply -l` would neither apply nor prune it"
            )
    assert base | cert_manager == seen, "the lists name only kinds corral installs"
    assert not base & cert_manager
    assert all(k.startswith("cert-manager.io/") for k in cert_manager)


def _upgrade_command() -> list[str]:
    """The upgrade command with --prune, as docs/upgrade.md writes it."""
    [block] = [
        b for b in blocks(read("upgrade.md"), "sh") if "kubectl apply -k my-corral/ --prune" in b
    ]
    line = re.sub(r"\\\n\s*", " ", block).strip()
    argv = shlex.split(line)
    assert argv[:3] == ["kubectl", "apply", "-k"] and f"-l {LABEL}" in line
    return argv


# --- the upgrade, run ---------------------------------------------------------------------


def _kustomization(folder: Path, components: list[str]) -> Path:
    folder.mkdir(parents=True)
    rel = os.path.relpath(MANIFESTS, folder)
    doc = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [f"{rel}/base"],
        "components": [f"{rel}/components/{c}" for c in components],
    }
    (folder / "kustomization.yaml").write_text(yaml.safe_dump(doc))
    return folder


# Built-in kinds the in-memory server does not serve, registered here as a real cluster
# serves them: Services (corral's webhook has one) and the rest of the kinds kubectl
# prunes when given no list (kubectl v1.32, staging/src/k8s.io/kubectl/pkg/util/prune/
# prune.go, defaultNamespacedPruneResources and defaultNonNamespacedPruneResources): it
# maps each before it prunes, and stops at one the server does not serve.
NOT_SERVED = (
    ResourceType("", "v1", "services", "Service", True),
    ResourceType("", "v1", "endpoints", "Endpoints", True, False),
    ResourceType("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True),
    ResourceType("", "v1", "persistentvolumes", "PersistentVolume", False),
    ResourceType("", "v1", "replicationcontrollers", "ReplicationController", True),
    ResourceType("networking.k8s.io", "v1", "ingresses", "Ingress", True),
    ResourceType("apps", "v1", "daemonsets", "DaemonSet", True),
)
TOKEN = "upgrade-test"


async def kubectl(kubeconfig: Path, *args: str) -> str:
    """kubectl as its own process, awaited (the server runs in this event loop)."""
    proc = await asyncio.create_subprocess_exec(
        "kubectl",
        *args,
        env={**os.environ, "KUBECONFIG": str(kubeconfig), "KUBECACHEDIR": str(kubeconfig.parent)},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=120)
    assert proc.returncode == 0, f"kubectl {' '.join(args)}: {err.decode()}"
    return out.decode()


@pytest.mark.scenario
async def test_the_upgrade_prunes_everything_the_new_install_drops(tmp_path: Path) -> None:
    """From the descheduler as a Deployment to the default install (a CronJob), with the
    upgrade command as docs/upgrade.md writes it: what only the old install had is gone
    (the Deployment and its RBAC), the new install is whole, and the move ledger the
    descheduler made as it ran is kept."""
    old = _kustomization(
        tmp_path / "old", ["backend-volcano", "certs-self-signed", "descheduler-deployment"]
    )
    new = _kustomization(
        tmp_path / "new", ["backend-volcano", "certs-self-signed", "descheduler-cronjob"]
    )
    ctx, ca = server_tls(tmp_path)
    api = ApiServer(versions=Versions.of(kube="1.32"), ssl_context=ctx)
    for rt in NOT_SERVED:
        if (rt.group, rt.version, rt.plural) not in {t.gvr for t in api.store.types.values()}:
            api.store.register(rt)
    api.accept(TOKEN)
    await api.start()
    try:
        config = tmp_path / "kube" / "config"
        write_kubeconfig(config, api.url, TOKEN, ca.read_bytes())
        await kubectl(config, "apply", "-k", str(old))
        # What the descheduler makes as it runs (its move ledger): not applied, so kept.
        ledger = tmp_path / "ledger.yaml"
        ledger.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {
                        "name": "corral-descheduler-moves",
                        "namespace": "corral-system",
                        "labels": {"app.kubernetes.io/part-of": "corral"},
                    },
                    "data": {},
                }
            )
        )
        await kubectl(config, "create", "-f", str(ledger))

        argv = _upgrade_command()
        argv[argv.index("my-corral/")] = str(new)
        await kubectl(config, *argv[1:])

        rendered = [*build(old), *build(new)]
        kinds = sorted({o["kind"] for o in rendered if o["kind"] != "Namespace"})
        listed = await kubectl(config, "get", ",".join(kinds), "-A", "-l", LABEL, "-o", "json")
    finally:
        await api.stop()
    have = {(o["kind"], o["metadata"]["name"]) for o in json.loads(listed)["items"]}
    want = {(o["kind"], o["metadata"]["name"]) for o in build(new) if o["kind"] != "Namespace"}
    want.add(("ConfigMap", "corral-descheduler-moves"))
    assert have == want, f"left behind: {sorted(have - want)}; missing: {sorted(want - have)}"


# --- README: the quick install ----------------------------------------------------------


def test_the_quick_install_gets_the_image_to_nodes_before_a_namespace_is_labelled() -> None:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Install on a cluster", 1)[1].split("\n## ", 1)[0]
    [block] = blocks(section, "sh")
    cmds = [ln.split("#", 1)[0].strip() for ln in block.splitlines() if ln.strip()]
    deploy = one(render_target(MANIFESTS), "Deployment", "corral-webhook")
    [image] = {c["image"] for c in deploy["spec"]["template"]["spec"]["containers"]}

    def at(prefix: str) -> int:
        return next(i for i, c in enumerate(cmds) if c.startswith(prefix))

    assert cmds[at("docker build")] == f"docker build -t {image} ."
    assert cmds[at("kind load docker-image")] == f"kind load docker-image {image}"
    order = [
        at("docker build"),
        at("kind load docker-image"),
        at("kubectl apply -k manifests/"),
        at("kubectl -n corral-system rollout status deploy/corral-webhook"),
        at("kubectl label namespace"),
    ]
    assert order == sorted(order), cmds
    # And the text says why, and what to do off kind.
    assert "failurePolicy: Fail" in section and "registry" in section and "images:" in section


# --- cert-manager ---------------------------------------------------------------------


def test_cert_manager_is_named_with_the_version_to_install() -> None:
    text = read("install.md")
    line = next(ln for ln in text.splitlines() if "certs-cert-manager" in ln and "only" in ln)
    assert re.search(r"cert-manager v1\.0 or later", line + text), "the oldest that works"
    [url] = re.findall(r"https://github\.com/cert-manager/cert-manager/releases/\S+", text)
    version = re.fullmatch(r".*/download/(v1\.\d+\.\d+)/cert-manager\.yaml", url)
    assert version, url
    assert f"{version.group(1)}, its newest release" in text
    objs = render_target(MANIFESTS / "overlays" / "cert-manager")
    assert {o["apiVersion"] for o in objs if o["kind"] in ("Certificate", "Issuer")} == {
        "cert-manager.io/v1"
    }
