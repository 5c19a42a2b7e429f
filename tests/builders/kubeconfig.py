"""A kubeconfig for a process or a plugin run that should find the in-memory API server
as kubectl finds a cluster."""

from __future__ import annotations

from pathlib import Path

import yaml

__all__ = ["kubeconfig"]


def kubeconfig(path: Path, server: str, token: str) -> str:
    """Write a kubeconfig of one context for ``server`` with a bearer ``token``; its
    path."""
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "t",
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": {"token": token}}],
        "contexts": [{"name": "t", "context": {"cluster": "c", "user": "u"}}],
    }
    path.write_text(yaml.safe_dump(doc))
    return str(path)
