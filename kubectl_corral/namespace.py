"""The namespace kubectl would use: ``-n``, else the kubeconfig context's, else the
in-cluster service account's, else ``default``."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from gangplace.kube.kubeconfig import SERVICE_ACCOUNT_DIR

__all__ = ["context_namespace", "kubeconfig_paths"]


def kubeconfig_paths(
    kubeconfig: str | None, environ: Mapping[str, str], home: Path | None = None
) -> list[Path]:
    """The kubeconfig files kubectl would read, in merge order."""
    if kubeconfig:
        return [Path(kubeconfig).expanduser()]
    if environ.get("KUBECONFIG"):
        return [Path(p).expanduser() for p in environ["KUBECONFIG"].split(os.pathsep) if p]
    return [(Path.home() if home is None else home) / ".kube" / "config"]


def _load(path: Path) -> dict[str, Any]:
    try:
        doc = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError):
        return {}
    return doc if isinstance(doc, dict) else {}


def context_namespace(
    kubeconfig: str | None,
    context: str | None,
    environ: Mapping[str, str] | None = None,
    *,
    home: Path | None = None,
    service_account_dir: Path | None = None,
) -> str:
    """The default namespace of ``context`` (default: the current context), merging
    the files as kubectl does: the first file to set a value wins."""
    env = os.environ if environ is None else environ
    docs = [_load(p) for p in kubeconfig_paths(kubeconfig, env, home) if p.is_file()]
    if docs:
        name = context or next(
            (d["current-context"] for d in docs if d.get("current-context")), None
        )
        for d in docs:
            for entry in d.get("contexts") or ():
                if isinstance(entry, dict) and entry.get("name") == name:
                    ns = (entry.get("context") or {}).get("namespace")
                    return str(ns) if ns else "default"
        return "default"
    sa = (SERVICE_ACCOUNT_DIR if service_account_dir is None else service_account_dir) / "namespace"
    try:
        return sa.read_text().strip() or "default"
    except OSError:
        return "default"
