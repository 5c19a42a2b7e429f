"""A cluster dump read into the planner's state: the one reader behind
``corral-descheduler plan --snapshot`` and ``kubectl corral ... --snapshot`` (through
:mod:`descheduler.api`), so both see the same cluster from the same file."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import resources
from typing import Any

from gangplace.config_errors import ConfigError
from gangplace.engine import EngineConfig, SnapshotError
from gangplace.engine.dump_checks import dump_warnings
from gangplace.engine.kinds import KINDS, Kinds
from gangplace.engine.timeparse import TimeFormatError, parse_time
from gangplace.snapshot_io import load_list

from descheduler.planning.state import ClusterState, StateError, state_from_list

__all__ = [
    "DUMP_ERRORS",
    "SAMPLE",
    "SAMPLES",
    "SNAPSHOT_TIME",
    "DumpState",
    "dump_objects",
    "read_dump",
]

# The bundled sample clusters, by the name `--snapshot sample:NAME` gives them; the
# first is the default of `plan`.
SAMPLES = {
    "trace": "sample-trace.json",
    "small": "sample-fragmented.json",
}
SAMPLE = SAMPLES["trace"]
# A dump may say when it was taken; plans on it are then reproducible without --now.
SNAPSHOT_TIME = "corral.dev/snapshot-time"


# What read_dump raises on a dump (or --now) that cannot be used; each names the file.
DUMP_ERRORS = (StateError, SnapshotError, ConfigError, TimeFormatError)


@dataclass(slots=True)
class DumpState:
    """The planner's state of a dump, where it came from (for titles) and what the
    dump holds that the state leaves out (warnings to print)."""

    state: ClusterState
    source: str
    doc: dict[str, Any]
    notes: list[str] = field(default_factory=list)


def _load(path: str | None) -> tuple[dict[str, Any], str]:
    name = path.removeprefix("sample:") if path and path.startswith("sample:") else None
    if path is None or name is not None:
        file = SAMPLE if name is None else SAMPLES.get(name)
        if file is None:
            raise ConfigError(
                f"--snapshot {path}: no such sample; choose from "
                + ", ".join(f"sample:{n}" for n in SAMPLES)
            )
        text = resources.files("descheduler.data").joinpath(file).read_text()
        return json.loads(text), f"the bundled sample cluster ({file})"
    return load_list(path), path


def _now(arg: str | None, doc: dict[str, Any]) -> datetime:
    if arg:
        return parse_time(arg)
    stamp = ((doc.get("metadata") or {}).get("annotations") or {}).get(SNAPSHOT_TIME)
    if stamp is not None and not isinstance(stamp, str):
        raise StateError(f"metadata.annotations.{SNAPSHOT_TIME}: expected an RFC 3339 string")
    return parse_time(stamp) if stamp else datetime.now(UTC)


def read_dump(
    path: str | None, now: str | None, engine: EngineConfig, kinds: Kinds = KINDS
) -> DumpState:
    """The dump in ``path`` (None or ``sample:NAME``: a bundled sample) as of ``now``
    (RFC 3339; default the dump's snapshot-time annotation, else the clock). Errors
    (StateError, SnapshotError, ConfigError, TimeFormatError) name the file."""
    doc, source = _load(path)
    try:
        state = state_from_list(doc, _now(now, doc), engine, kinds)
    except StateError as e:
        raise StateError(f"{source}: {e}") from None
    notes = [f"{source}: {n}" for n in dump_warnings(state.snapshot)]
    return DumpState(state, source, doc, notes)


def dump_objects(dump: DumpState, kind: str) -> list[dict[str, Any]]:
    """The dump's objects of ``kind`` (Pod, Namespace...), as the file holds them."""
    items = dump.doc.get("items") or []
    return [x for x in items if isinstance(x, dict) and x.get("kind") == kind]
