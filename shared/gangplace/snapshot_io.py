"""Reading snapshots from files: the one place the engine's users load cluster dumps."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

from .engine import EngineConfig, Snapshot, SnapshotError

__all__ = ["SAMPLE_CLUSTER", "load_list", "load_snapshot"]

SAMPLE_CLUSTER = "sample-cluster.json"


def load_list(path: str | Path | None) -> dict[str, Any]:
    """A ``kubectl get ... -o json`` List from ``path``, or the bundled sample cluster
    when ``path`` is None. Raises SnapshotError naming the file on bad content."""
    if path is None:
        text = resources.files("gangplace.data").joinpath(SAMPLE_CLUSTER).read_text()
        where = f"bundled {SAMPLE_CLUSTER}"
    else:
        where = str(path)
        try:
            text = Path(path).read_text()
        except OSError as e:
            raise SnapshotError(f"{where}: {e.strerror or e}") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise SnapshotError(f"{where}: not JSON ({e.msg} at line {e.lineno})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("items"), list):
        raise SnapshotError(f"{where}: expected a Kubernetes List with an 'items' array")
    return doc


def load_snapshot(path: str | Path | None, config: EngineConfig | None = None) -> Snapshot:
    doc = load_list(path)
    try:
        return Snapshot.from_list(doc, config)
    except SnapshotError as e:
        raise SnapshotError(f"{path or SAMPLE_CLUSTER}: {e}") from None
