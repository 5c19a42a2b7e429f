"""The engine's one rule for the work a move throws away."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from gangplace.engine.checkpoints import (
    ANNOTATION_CHECKPOINT_INTERVAL,
    ANNOTATION_LAST_CHECKPOINT,
    CheckpointError,
    Checkpoints,
    last_checkpoint,
    pod_work_at_risk,
    read_checkpoints,
    work_at_risk,
)
from gangplace.engine.node_pod_records import pod_from_json
from hypothesis import given
from hypothesis import strategies as st

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
START = NOW - timedelta(hours=2, minutes=10)


def _pod(annotations: dict[str, str] | None = None, gpus: int = 4) -> dict[str, object]:
    return {
        "metadata": {
            "name": "trainer-0",
            "namespace": "ml",
            "creationTimestamp": "2026-12-01T09:00:00Z",
            "annotations": annotations or {},
        },
        "spec": {
            "nodeName": "n1",
            "containers": [
                {"name": "main", "resources": {"requests": {"nvidia.com/gpu": str(gpus)}}}
            ],
        },
        "status": {
            "phase": "Running",
            "startTime": "2026-12-01T09:50:00Z",
            "containerStatuses": [
                {"name": "main", "state": {"running": {"startedAt": "2026-12-01T09:50:00Z"}}}
            ],
        },
    }


def test_without_checkpoints_the_whole_run_is_at_risk() -> None:
    pod = pod_from_json(_pod())
    assert pod.started == "2026-12-01T09:50:00Z"
    assert pod_work_at_risk(pod, NOW) == pytest.approx(4 * START_TO_NOW)


START_TO_NOW = (NOW - START).total_seconds()


def test_an_interval_loses_only_the_work_since_the_last_multiple() -> None:
    pod = pod_from_json(_pod({ANNOTATION_CHECKPOINT_INTERVAL: "30m"}))
    # started 09:50, checkpoints 10:20, 10:50, 11:20, 11:50: 10 minutes at risk
    assert pod_work_at_risk(pod, NOW) == pytest.approx(4 * 600)


def test_the_last_checkpoint_annotation_wins_over_the_interval() -> None:
    pod = pod_from_json(
        _pod(
            {
                ANNOTATION_CHECKPOINT_INTERVAL: "30m",
                ANNOTATION_LAST_CHECKPOINT: "2026-12-01T11:55:00Z",
            }
        )
    )
    assert pod_work_at_risk(pod, NOW) == pytest.approx(4 * 300)


def test_a_future_or_earlier_run_checkpoint_is_not_believed() -> None:
    future = pod_from_json(_pod({ANNOTATION_LAST_CHECKPOINT: "2026-12-01T13:00:00Z"}))
    assert pod_work_at_risk(future, NOW) == pytest.approx(4 * START_TO_NOW)
    before_start = pod_from_json(_pod({ANNOTATION_LAST_CHECKPOINT: "2026-12-01T09:00:00Z"}))
    assert pod_work_at_risk(before_start, NOW) == pytest.approx(4 * START_TO_NOW)


def test_the_workload_says_it_when_the_pod_does_not() -> None:
    pod = pod_from_json(_pod())
    workload = ("Job ml/trainer", {ANNOTATION_LAST_CHECKPOINT: "2026-12-01T11:30:00Z"})
    assert pod_work_at_risk(pod, NOW, [workload]) == pytest.approx(4 * 1800)


def test_a_restarted_container_starts_the_run_again() -> None:
    obj = _pod()
    obj["status"]["containerStatuses"][0]["state"]["running"]["startedAt"] = (  # type: ignore[index]
        "2026-12-01T11:40:00Z"
    )
    assert pod_work_at_risk(pod_from_json(obj), NOW) == pytest.approx(4 * 1200)


def test_without_a_start_time_the_creation_is_the_start() -> None:
    obj = _pod()
    obj["status"] = {"phase": "Running"}
    pod = pod_from_json(obj)
    assert pod.started == ""
    assert pod_work_at_risk(pod, NOW) == pytest.approx(4 * 3 * 3600)


def test_a_pod_without_gpus_risks_no_gpu_time() -> None:
    assert pod_work_at_risk(pod_from_json(_pod(gpus=0)), NOW) == 0.0


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        (
            ANNOTATION_CHECKPOINT_INTERVAL,
            "30",
            'pod ml/trainer-0: corral.dev/checkpoint-interval: "30" is a number without a '
            "unit; allowed: a duration",
        ),
        (
            ANNOTATION_CHECKPOINT_INTERVAL,
            "half an hour",
            'pod ml/trainer-0: corral.dev/checkpoint-interval: "half an hour" is not a duration',
        ),
        (
            ANNOTATION_CHECKPOINT_INTERVAL,
            "0s",
            'pod ml/trainer-0: corral.dev/checkpoint-interval: "0s" is too short: at least 1s',
        ),
        (
            ANNOTATION_LAST_CHECKPOINT,
            "yesterday",
            'pod ml/trainer-0: corral.dev/last-checkpoint: "yesterday" is not a time; allowed: '
            "an RFC 3339 time",
        ),
    ],
)
def test_bad_values_are_named_with_what_is_allowed(key: str, value: str, expected: str) -> None:
    with pytest.raises(CheckpointError) as e:
        pod_work_at_risk(pod_from_json(_pod({key: value})), NOW)
    assert str(e.value).startswith(expected)
    assert "\n" not in str(e.value)


def test_the_nearest_interval_and_the_latest_checkpoint_are_read() -> None:
    got = read_checkpoints(
        [
            ("pod", {ANNOTATION_CHECKPOINT_INTERVAL: "10m"}),
            (
                "job",
                {
                    ANNOTATION_CHECKPOINT_INTERVAL: "1h",
                    ANNOTATION_LAST_CHECKPOINT: "2026-12-01T11:00:00Z",
                },
            ),
            ("jobset", {ANNOTATION_LAST_CHECKPOINT: "2026-12-01T11:20:00+00:00"}),
        ]
    )
    assert got == Checkpoints(600.0, datetime(2026, 12, 1, 11, 20, tzinfo=UTC))


_times = st.integers(min_value=0, max_value=30 * 86400)


@given(
    start=_times,
    elapsed=_times,
    interval=st.none() | st.integers(min_value=1, max_value=86400),
    last=st.none() | st.integers(min_value=-86400, max_value=60 * 86400),
    gpus=st.integers(min_value=0, max_value=16),
)
def test_the_work_at_risk_is_bounded_by_the_run(
    start: int, elapsed: int, interval: int | None, last: int | None, gpus: int
) -> None:
    """Never negative, never more than the whole run, and less than one interval of it
    when the workload checkpoints on a schedule (and says no later checkpoint)."""
    t0 = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=start)
    now = t0 + timedelta(seconds=elapsed)
    cp = Checkpoints(
        float(interval) if interval else None,
        t0 + timedelta(seconds=last) if last is not None else None,
    )
    lc = last_checkpoint(t0, now, cp)
    assert t0 <= lc <= now
    risk = work_at_risk(float(gpus), t0, now, cp)
    assert 0 <= risk <= gpus * elapsed + 1e-6
    if interval is not None and cp.last is None:
        assert risk <= gpus * interval + 1e-6
