"""kubectl corral on a cluster with the native gang API (Kubernetes 1.37, in memory): a
gang known by its pods' ``spec.schedulingGroup`` and its PodGroup's minCount, read with
the plugin's own list calls, as the descheduler reads it."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from tests.kubeapi import ApiServer
from tests.kubeapi import objects as o
from tests.kubeapi.versions import Versions
from tests.plugin.test_kubectl_corral import corral


def podgroup(name: str, min_count: int) -> dict[str, object]:
    return {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {
            "workloadRef": {"workloadName": name, "templateName": "gang"},
            "schedulingPolicy": {"gang": {"minCount": min_count}},
            "disruptionMode": {"all": {}},
        },
    }


async def test_gangs_lists_a_native_gang_with_its_min_count(tmp_path: Path) -> None:
    members = []
    for i, node in enumerate(["gpu-a", "gpu-a", None]):
        p = o.pod(f"train-{i}", "ml", node=node, gpus=1)
        p["spec"]["schedulingGroup"] = {"podGroupName": "train"}
        members.append(p)
    async with ApiServer(versions=Versions.of("1.37", native_gangs=True)) as api:
        api.store.load(
            [
                o.namespace("ml"),
                o.node("gpu-a", gpus=8),
                podgroup("train", 2),
                *members,
            ]
        )
        api.accept("t0ken")
        kc = tmp_path / "kubeconfig"
        kc.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "t", "cluster": {"server": api.url}}],
                    "users": [{"name": "admin", "user": {"token": "t0ken"}}],
                    "contexts": [
                        {
                            "name": "ml",
                            "context": {"cluster": "t", "user": "admin", "namespace": "ml"},
                        }
                    ],
                    "current-context": "ml",
                }
            )
        )
        code, out, err = await corral(kc, "gangs", "-o", "json")
    assert code == 0, err
    (gang,) = json.loads(out)["gangs"]
    assert (gang["name"], gang["keys"], gang["placed"], gang["min_available"]) == (
        "train",
        "kubernetes",
        2,
        2,
    )
    assert gang["status"] == "running" and gang["waiting"] == 1
