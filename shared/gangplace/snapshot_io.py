"""Reading snapshots from files: the one place the engine's users load cluster dumps.

Every way a file can fail to be a dump ends in one :class:`SnapshotError` line naming
the file, what is wrong and how to make a good one."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

from gangplace.engine import EngineConfig, Snapshot, SnapshotError
from gangplace.engine.dump_checks import dump_warnings

__all__ = ["DUMP_COMMAND", "SAMPLE_CLUSTER", "load_list", "load_snapshot"]

SAMPLE_CLUSTER = "sample-cluster.json"
DUMP_COMMAND = "kubectl get nodes,pods -A -o json"


def _looks_like_yaml(text: str) -> bool:
    head = text.lstrip()[:200]
    return head.startswith(("apiVersion:", "kind:", "items:", "---", "- ")) or (
        not head.startswith(("{", "[")) and ": " in head.split("\n", 1)[0]
    )


def _parse(text: str, where: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        if _looks_like_yaml(text):
            raise SnapshotError(
                f"{where}: not JSON (it looks like YAML); corral reads JSON dumps: {DUMP_COMMAND}"
            ) from None
        raise SnapshotError(
            f"{where}: not JSON ({e.msg} at line {e.lineno}, column {e.colno}); "
            f"a dump is the output of {DUMP_COMMAND}"
        ) from None
    except RecursionError:
        raise SnapshotError(f"{where}: not a dump (nested too deeply)") from None


def load_list(path: str | Path | None) -> dict[str, Any]:
    """A ``kubectl get ... -o json`` List from ``path``, or the bundled sample cluster
    when ``path`` is None. Raises SnapshotError naming the file on bad content: not
    readable, not UTF-8, not JSON (a YAML dump is named as such), not a List, or a
    List with no Node (nothing to measure or place on)."""
    if path is None:
        text = resources.files("gangplace.data").joinpath(SAMPLE_CLUSTER).read_text()
        where = f"bundled {SAMPLE_CLUSTER}"
    else:
        where = str(path)
        try:
            text = Path(path).read_bytes().decode("utf-8")
        except OSError as e:
            raise SnapshotError(f"{where}: {e.strerror or e}") from None
        except UnicodeDecodeError:
            raise SnapshotError(
                f"{where}: not JSON (not UTF-8 text); a dump is the output of {DUMP_COMMAND}"
            ) from None
    doc = _parse(text, where)
    if not isinstance(doc, dict) or not isinstance(doc.get("items"), list):
        raise SnapshotError(
            f"{where}: expected a Kubernetes List with an 'items' array, as {DUMP_COMMAND} writes"
        )
    if not any(isinstance(x, dict) and x.get("kind") == "Node" for x in doc["items"]):
        what = "is empty" if not doc["items"] else "holds no Node"
        raise SnapshotError(
            f"{where}: the List {what}: nothing to measure or place on; dump the nodes "
            f"with the pods: {DUMP_COMMAND}"
        )
    return doc


def load_snapshot(
    path: str | Path | None, config: EngineConfig | None = None, notes: list[str] | None = None
) -> Snapshot:
    """The engine's snapshot of the dump in ``path`` (None: the sample). What the dump
    holds that the figures leave out is appended to ``notes`` (see
    :func:`gangplace.engine.dump_checks.dump_warnings`) for the caller to print."""
    doc = load_list(path)
    try:
        snap = Snapshot.from_list(doc, config)
    except SnapshotError as e:
        raise SnapshotError(f"{path or SAMPLE_CLUSTER}: {e}") from None
    if notes is not None:
        notes.extend(f"{path or SAMPLE_CLUSTER}: {n}" for n in dump_warnings(snap))
    return snap
