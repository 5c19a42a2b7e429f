"""``kubectl corral demo``: the story run to the end on the in-memory cluster (``make
demo``), and the refusals a user meets on a cluster that lacks corral, Volcano or GPUs,
each leaving the cluster as it was."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubectl_corral import local
from kubectl_corral.cli import run
from scripts import demo_local
from tests.builders.kubeconfig import kubeconfig
from tests.kubeapi import ApiServer
from tests.kubeapi import objects as o

# The whole demo story on the in-memory cluster: not in `make test-fast`.
pytestmark = pytest.mark.scenario


@pytest.fixture
def forget_cluster() -> Iterator[None]:
    """``make demo`` registers the in-memory cluster with the plugin; forget it after."""
    yield
    local.provide(None)


async def demo(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = await run(["demo", *argv], out=out, err=err, environ={})
    return code, out.getvalue(), err.getvalue()


@pytest.mark.usefixtures("forget_cluster")
def test_make_demo_tells_the_whole_story(capsys: pytest.CaptureFixture[str]) -> None:
    code = demo_local.main(["--timeout", "30"])  # what `make demo` runs
    out, err = capsys.readouterr()
    assert code == 0, err + out
    assert "corral demo on the in-memory cluster" in out and "no real pods run" in out
    steps = re.findall(r"^== (\d)\. (.*)$", out, flags=re.M)
    assert [n for n, _ in steps] == ["1", "2", "3", "4"]
    one, two, three, four = re.split(r"^== \d\. .*$", out, flags=re.M)[1:]
    # 1: three workers bound and running, one pending
    assert len(re.findall(r"^train-\S+\s+8\s+n\d\s+Running$", one, flags=re.M)) == 3
    assert len(re.findall(r"^train-\S+\s+8\s+-\s+Pending$", one, flags=re.M)) == 1
    # 2: admitted by corral's webhook for Volcano, nothing bound
    assert "Admitted as: schedulerName volcano" in two
    assert len(re.findall(r"^train-\S+\s+8\s+-\s+Pending$", two, flags=re.M)) == 4
    # 3: the fitting gang runs whole
    assert len(re.findall(r"^pairs-\S+\s+2\s+n\d\s+Running$", three, flags=re.M)) == 4
    assert re.search(r"^\S+\s+4\s+Running\s", three, flags=re.M)
    # 4: 7/6/7, then room made and the 4-GPU gang running
    assert re.search(r"^n1\s+7/8\s+1\s", four, flags=re.M)
    assert re.search(r"^n2\s+6/8\s+2\s", four, flags=re.M)
    assert "moved 2 pod(s)" in four
    assert re.search(r"`wide` runs on n\d", four)
    assert out.rstrip().endswith("Done: every object the demo made is deleted.")


async def test_local_without_a_checkout_says_so() -> None:
    code, out, err = await demo("--local")
    assert code == 2 and out == ""
    assert len(err.splitlines()) == 1
    assert "part of corral's tests, which are not installed with the plugin" in err
    assert "make demo" in err


@pytest.mark.slow
def test_the_installed_plugin_alone_says_local_needs_a_checkout(tmp_path: Path) -> None:
    plugin = Path(sys.executable).with_name("kubectl-corral")
    done = subprocess.run(
        [str(plugin), "demo", "--local"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path)},
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("kubectl corral demo --local: the in-memory cluster")
    assert len(done.stderr.splitlines()) == 1 and "make demo" in done.stderr


@pytest.fixture
def cfg(api: ApiServer, tmp_path: Path) -> str:
    return kubeconfig(tmp_path / "kubeconfig", api.accept("demo").url, "demo")


def mwc() -> dict[str, object]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "corral-webhook"},
        "webhooks": [],
    }


async def test_refuses_without_corral(api: ApiServer, cfg: str) -> None:
    code, _, err = await demo("--kubeconfig", cfg)
    assert code == 1
    assert "corral is not installed on this cluster" in err and "kubectl apply -k" in err
    assert api.requests("POST") == []  # nothing made


async def test_refuses_without_volcano(api: ApiServer, cfg: str) -> None:
    api.store.load([mwc()])
    api.store.types.pop(("scheduling.volcano.sh", "v1beta1", "queues"))
    code, _, err = await demo("--kubeconfig", cfg)
    assert code == 1 and "Volcano is not installed on this cluster" in err


async def test_refuses_without_gpus_and_adds_them_only_when_asked(api: ApiServer, cfg: str) -> None:
    api.store.load(
        [
            mwc(),
            o.volcano_queue("default"),
            *(o.node(f"n{i}") for i in range(1, 4)),
        ]
    )
    code, _, err = await demo("--kubeconfig", cfg)
    assert code == 1 and "needs three schedulable nodes with 8 nvidia.com/gpu" in err
    assert "--add-gpus" in err
    nodes = api.store.resource("nodes")
    assert all("nvidia.com/gpu" not in n["status"]["capacity"] for n in api.store.items(nodes))
    # With --add-gpus it advertises them; the story then fails here (no scheduler in a
    # bare API server) and everything is undone: namespaces, taints, the pretend GPUs.
    code, out, err = await demo("--kubeconfig", cfg, "--add-gpus", "--timeout", "0.5")
    assert code == 1 and "waited 0s for 3 of the 4 workers bound" in err
    assert "Nodes n1, n2, n3: 8 GPUs each" in out
    for n in api.store.items(nodes):
        assert "nvidia.com/gpu" not in n["status"]["capacity"]
        assert not n.get("spec", {}).get("taints")
    namespaces = [n["metadata"]["name"] for n in api.store.items(api.store.resource("namespaces"))]
    assert not [n for n in namespaces if n.startswith("corral-demo")]
    assert api.requests("PATCH", "/nodes/n1/status")  # it did advertise them
