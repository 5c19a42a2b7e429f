"""Rendering manifests/ the way an admin does, for the manifest tests.

Rendering uses kustomize itself: ``kustomize build`` if it is on the PATH, else
``kubectl kustomize`` (kubectl has kustomize built in). Besides manifests/ and every
overlay, every combination of one component of each kind is rendered from a
kustomization written to a temporary folder, so that no combination an admin can
write goes untested.
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml
from gangplace.kube import rbac

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "manifests"
OVERLAYS = sorted(p.parent for p in (MANIFESTS / "overlays").glob("*/kustomization.yaml"))

Obj = dict[str, Any]


class KustomizeMissing(RuntimeError):
    pass


@functools.cache
def kustomize_command() -> tuple[str, ...]:
    if exe := shutil.which("kustomize"):
        return (exe, "build")
    if exe := shutil.which("kubectl"):
        return (exe, "kustomize")
    raise KustomizeMissing(
        "the manifest tests render manifests/ with kustomize: install kubectl (it has "
        "kustomize built in; `apt-get install kubectl`) or kustomize"
    )


_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@functools.cache
def _render_dir(path: str) -> str:
    proc = subprocess.run(
        [*kustomize_command(), path], capture_output=True, text=True, timeout=60, check=False
    )
    if proc.returncode != 0:
        raise AssertionError(f"kustomize failed on {path}:\n{proc.stderr}")
    # Kept as JSON text, so that each caller gets objects of its own, quickly.
    return json.dumps([d for d in yaml.load_all(proc.stdout, Loader=_Loader) if d])


def render(path: Path | str) -> list[Obj]:
    objs: list[Obj] = json.loads(_render_dir(str(path)))
    return objs


def combinations() -> Iterator[dict[str, str]]:
    """Every install an admin can compose: one value of each choice."""
    names = list(rbac.CHOICES)
    for values in itertools.product(*(rbac.CHOICES[n] for n in names)):
        yield dict(zip(names, values, strict=True))


def combination_id(choices: dict[str, str]) -> str:
    return "+".join(choices.values())


_SCRATCH: list[tempfile.TemporaryDirectory[str]] = []
_SCRATCH_LOCK = threading.Lock()


def _scratch() -> tempfile.TemporaryDirectory[str]:
    """One folder for the generated kustomizations, removed when the tests end.

    Locked, not ``functools.cache``: prerender's threads would each make one, and the
    ones the cache drops are collected, deleting the folders made in them.
    """
    with _SCRATCH_LOCK:
        if not _SCRATCH:
            _SCRATCH.append(tempfile.TemporaryDirectory(prefix="corral-kustomize-"))
        return _SCRATCH[0]


@functools.cache
def _combination_dir(key: tuple[tuple[str, str], ...], extra: tuple[str, ...]) -> str:
    scratch = Path(_scratch().name)
    folder = Path(tempfile.mkdtemp(dir=scratch))
    # kustomize takes only relative paths.
    rel = os.path.relpath(MANIFESTS, folder)
    components = [f"{rel}/components/{c}-{v}" for c, v in key]
    components += [f"{rel}/components/{e}" for e in extra]
    doc = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [f"{rel}/base"],
        "components": components,
    }
    (folder / "kustomization.yaml").write_text(yaml.safe_dump(doc))
    return str(folder)


def render_choices(choices: dict[str, str], extra: tuple[str, ...] = ()) -> list[Obj]:
    return render(_combination_dir(tuple(choices.items()), extra))


# A kustomization folder, or install choices with extra components.
Target = Path | tuple[dict[str, str], tuple[str, ...]]


def targets() -> list[tuple[str, Target]]:
    """(id, what to render): manifests/, each overlay, each combination, and the
    default choices with the optional fail-open component."""
    out: list[tuple[str, Target]] = [("manifests", MANIFESTS)]
    out += [(f"overlays/{p.name}", p) for p in OVERLAYS]
    out += [(f"combo:{combination_id(c)}", (c, ())) for c in combinations()]
    default = {name: values[0] for name, values in rbac.CHOICES.items()}
    out.append((f"combo:{combination_id(default)}+fail-open", (default, ("fail-open",))))
    return out


def prerender() -> None:
    """Render every target at once (kustomize runs in processes of its own)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(lambda t: render_target(t[1]), targets()))


def render_target(what: Target) -> list[Obj]:
    return render(what) if isinstance(what, Path) else render_choices(*what)


# --- reading a render -------------------------------------------------------------------


def find(objs: list[Obj], kind: str, name: str | None = None) -> list[Obj]:
    return [
        o for o in objs if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)
    ]


def one(objs: list[Obj], kind: str, name: str | None = None) -> Obj:
    found = find(objs, kind, name)
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def config_map(objs: list[Obj], prefix: str) -> Obj:
    """The generated ConfigMap ``prefix-<hash>``."""
    found = [
        o
        for o in find(objs, "ConfigMap")
        if o["metadata"]["name"] == prefix or o["metadata"]["name"].startswith(prefix + "-")
    ]
    assert len(found) == 1, f"expected one ConfigMap {prefix}, found {len(found)}"
    return found[0]


def pod_templates(objs: list[Obj]) -> Iterator[tuple[Obj, Obj]]:
    """(workload, pod template spec) for every Deployment and CronJob."""
    for o in objs:
        if o["kind"] == "Deployment":
            yield o, o["spec"]["template"]
        elif o["kind"] == "CronJob":
            yield o, o["spec"]["jobTemplate"]["spec"]["template"]


def choices_of(objs: list[Obj]) -> dict[str, str]:
    """Which choice a render made, read from what it contains."""
    webhook = yaml.safe_load(config_map(objs, "corral-webhook-config")["data"]["webhook.yaml"])
    certs = "cert-manager" if find(objs, "Certificate") else "self-signed"
    mode = "cronjob" if find(objs, "CronJob", "corral-descheduler") else "deployment"
    return {"backend": webhook.get("backend", "volcano"), "certs": certs, "descheduler": mode}


def rbac_of(objs: list[Obj]) -> list[Obj]:
    kinds = ("Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding")
    return [o for o in objs if o["kind"] in kinds]
