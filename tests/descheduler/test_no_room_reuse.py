"""Waiting gangs of one shape that found no room: the next of that shape is answered
from the first (``make_room._NoRoom``) -- and every plan is the one a fresh search for
each gang gives."""

from __future__ import annotations

import importlib
import json
from collections.abc import Sequence
from typing import Any

import pytest
from gangplace.engine import Snapshot
from gangplace.sim.gang_study import JobMove, JobTemplate, StudyState, run_detailed

from descheduler.config import DeschedulerConfig
from descheduler.planning.planner import plan
from descheduler.planning.state import ClusterState
from descheduler.study import CorralHook
from tests.builders.records import gpu_node, shape

make_room_module = importlib.import_module("descheduler.planning.strategies.make_room.make_room")

# Many one-GPU jobs of few shapes and gangs of 3 and 4 on a small cluster, overloaded:
# many waiting gangs of one shape, and few moves that fit (the study's 120% regime).
TEMPLATES = [
    JobTemplate(shape(8000, 1), 1),
    JobTemplate(shape(16000, 1), 1),
    JobTemplate(shape(8000, 1), 3),
    JobTemplate(shape(8000, 2), 4),
]


def _states(config: DeschedulerConfig, *, priorities: bool) -> list[ClusterState]:
    """The cluster states the study's hook plans on, round by round."""
    out: list[ClusterState] = []

    class Recording(CorralHook):
        def __call__(self, state: StudyState) -> Sequence[JobMove]:
            out.append(self.cluster_state(state, self._time(state.now)))
            return CorralHook.__call__(self, state)

    snap = Snapshot([gpu_node(f"n{i}", 64000, 4) for i in range(6)])
    run_detailed(
        snap,
        TEMPLATES,
        1.3,
        "all-or-nothing",
        hook=Recording(config, 2.0),
        jobs=90,
        high_share=0.3 if priorities else 0.0,
        queues=2,
    )
    return out[::3]


def _plan(state: ClusterState, config: DeschedulerConfig) -> str:
    p = plan(state, config, largest=False)
    return json.dumps(p.to_dict(), sort_keys=True, default=str)


@pytest.mark.parametrize("priorities", [False, True])
@pytest.mark.parametrize(
    "overrides", [{}, {"eviction": {"victim_priority": "LowerPriority"}}], ids=["default", "lower"]
)
def test_reused_answers_plan_as_fresh_searches(
    monkeypatch: pytest.MonkeyPatch, overrides: dict[str, Any], priorities: bool
) -> None:
    config = DeschedulerConfig.model_validate(overrides)
    states = _states(config, priorities=priorities)
    assert len(states) >= 5
    searched = []
    real = make_room_module._room_or_exact

    def counting(*args: Any) -> Any:
        searched.append(1)
        return real(*args)

    monkeypatch.setattr(make_room_module, "_room_or_exact", counting)
    reused = [_plan(s, config) for s in states]
    with_reuse = len(searched)
    searched.clear()
    monkeypatch.setattr(make_room_module._NoRoom, "_key", staticmethod(lambda d: None))
    fresh = [_plan(s, config) for s in states]
    assert reused == fresh
    assert sum('"unserved": []' not in p for p in fresh) >= 3  # gangs got no room
    if not overrides:
        assert with_reuse < len(searched)  # and answers were reused
    # (under LowerPriority with one priority, every reason names its gang: none is reused)
