"""docs/install.md, "Try it on kind", says what the repository does: the files it names
exist, the kind cluster has the three workers the demo needs and the node names the
commands use, the image, Deployment and opt-in label are those of the manifests the
tests render, the `kubectl corral demo` flags exist, and the example Jobs are valid
Kubernetes 1.28 objects that do on the in-memory cluster (corral's webhook, Volcano and
kube-scheduler models) what the section says: the one that fits runs whole, the other
waits whole."""

from __future__ import annotations

import asyncio
import re
import shlex
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from gangplace.kube.resources import JOBS, NAMESPACES, PODS

from kubectl_corral.cli import build_parser
from tests.builders.manifests import MANIFESTS, one, render
from tests.kubeapi.versions import Release
from tests.played import in_volcano_table

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "install.md"


def section() -> str:
    text = DOC.read_text()
    assert "## Try it on kind" in text
    return text.split("## Try it on kind", 1)[1].split("\n## ", 1)[0]


def commands() -> list[str]:
    """Every shell line of the section's code blocks, continuations joined."""
    blocks = re.findall(r"```sh\n(.*?)```", section(), flags=re.S)
    lines: list[str] = []
    for b in blocks:
        joined = re.sub(r"\\\n\s*", " ", b)
        lines += [ln.strip() for ln in joined.splitlines() if ln.strip()]
    return lines


def kind_config() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((ROOT / "examples/kind-cluster.yaml").read_text())
    return doc


def test_named_files_exist() -> None:
    named = set(re.findall(r"examples/[\w./-]+\.yaml", section()))
    assert named, "the section names the example files"
    for path in named:
        assert (ROOT / path).is_file(), path


def test_the_kind_cluster_and_its_node_names() -> None:
    cfg = kind_config()
    workers = [n for n in cfg["nodes"] if n["role"] == "worker"]
    assert len(workers) == 3  # the demo's three nodes
    name = cfg["name"]
    cmds = " ".join(commands())
    assert f"kind load docker-image corral:0.1.0 --name {name}" in cmds
    assert f"kind delete cluster --name {name}" in section()
    # kind names workers NAME-worker, NAME-worker2, ...
    loop = next(c for c in commands() if c.startswith("for n in"))
    assert loop.split(" in ", 1)[1].split(";")[0].split() == [
        f"{name}-worker",
        f"{name}-worker2",
        f"{name}-worker3",
    ]


@pytest.mark.kubectl  # renders manifests/ with kubectl kustomize
def test_the_commands_match_the_rendered_manifests() -> None:
    objs = render(MANIFESTS)
    cmds = commands()
    assert "kubectl apply -k manifests/" in cmds
    deploy = one(objs, "Deployment", "corral-webhook")
    assert deploy["metadata"]["namespace"] == "corral-system"
    assert "kubectl -n corral-system rollout status deploy/corral-webhook" in cmds
    [image] = {c["image"] for c in deploy["spec"]["template"]["spec"]["containers"]}
    assert f"docker build -t {image} ." in cmds
    mwc = one(objs, "MutatingWebhookConfiguration", "corral-webhook")
    label = next(c for c in cmds if c.startswith("kubectl label namespace ml "))
    key, value = label.rsplit(" ", 1)[1].split("=")
    sel = mwc["webhooks"][0]["namespaceSelector"]["matchExpressions"]
    assert {"key": key, "operator": "In", "values": [value]} in sel


def test_the_demo_flags_exist() -> None:
    for c in commands():
        if c.startswith("kubectl corral demo"):
            argv = shlex.split(c.split("#", 1)[0])[2:]
            args = build_parser().parse_args(argv)
            assert args.command == "demo"
    assert "make demo" in section()


@pytest.mark.parametrize("name", ["job-fits.yaml", "job-too-big.yaml"])
def test_the_example_jobs_are_valid(name: str) -> None:
    obj = yaml.safe_load((ROOT / "examples" / name).read_text())
    kubernetes_validate.validate(obj, "1.28", strict=True)


async def test_the_example_jobs_do_what_the_section_says() -> None:
    from tests.builders.demo_cluster import LocalCluster

    async with LocalCluster() as cluster:
        client = cluster.client
        await client.create(
            NAMESPACES,
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": "ml", "labels": {"corral.dev/gang-scheduling": "enabled"}},
            },
        )
        for name in ("job-fits.yaml", "job-too-big.yaml"):
            job = yaml.safe_load((ROOT / "examples" / name).read_text())
            made = await client.create(JOBS, job, namespace="ml")
            assert made["spec"]["template"]["spec"]["schedulerName"] == "volcano"

        async def pods(job: str) -> list[dict[str, Any]]:
            items: list[dict[str, Any]] = (
                await client.list(PODS, namespace="ml", label_selector=f"job-name={job}")
            )["items"]
            return items

        loop = asyncio.get_running_loop()
        end = loop.time() + 20
        while True:
            fits = await pods("pairs")
            if len([p for p in fits if p["status"].get("phase") == "Running"]) == 4:
                break
            assert loop.time() < end, fits
            await asyncio.sleep(0.05)
        while len(big := await pods("train")) < 4:  # the Job controller makes them one by one
            assert loop.time() < end, big
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.3)  # give a scheduler every chance to bind one
        big = await pods("train")
        assert len(big) == 4
        assert [p["spec"].get("nodeName") for p in big] == [None] * 4


def test_the_node_image_fits_the_volcano_release() -> None:
    """The kind cluster pins one node image, and the Volcano release the section applies
    supports that Kubernetes release (Volcano's own table, tests/played.py)."""
    images = {n.get("image") for n in kind_config()["nodes"]}
    assert len(images) == 1 and None not in images, "every node pins the same image"
    [image] = images
    m = re.fullmatch(r"kindest/node:v(1\.\d+)\.\d+@sha256:[0-9a-f]{64}", str(image))
    assert m, image
    [volcano] = re.findall(r"volcano-sh/volcano/v(1\.\d+)\.\d+/installer", section())
    assert in_volcano_table(Release.parse(m.group(1)), Release.parse(volcano))
