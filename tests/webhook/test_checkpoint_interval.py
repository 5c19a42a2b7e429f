"""corral.dev/checkpoint-interval is read by the descheduler (what a move of the
workload loses); a value it could not read is refused at admission, as every corral key."""

from __future__ import annotations

from typing import Any

import pytest

from tests.builders.reviews import bare_pod, checked, pod_template, review

KEY = "corral.dev/checkpoint-interval"


def _job(meta_ann: dict[str, str] | None = None, tmpl_ann: dict[str, str] | None = None) -> Any:
    template = pod_template({"nvidia.com/gpu": "1"})
    if tmpl_ann:
        template.setdefault("metadata", {}).setdefault("annotations", {}).update(tmpl_ann)
    meta: dict[str, Any] = {"name": "train", "namespace": "ml"}
    if meta_ann:
        meta["annotations"] = meta_ann
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": meta,
        "spec": {"parallelism": 2, "template": template},
    }


def _job_review(obj: Any, operation: str = "CREATE") -> dict[str, Any]:
    return review(obj, group="batch", version="v1", operation=operation)


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("30", "is a number without a unit"),
        ("half an hour", "is not a duration"),
        ("0s", "is too short: at least 1s"),
        ("-5m", "is negative"),
    ],
)
def test_a_bad_interval_on_a_workload_is_refused(value: str, problem: str) -> None:
    res, _ = checked(_job_review(_job({KEY: value})))
    resp = res.review["response"]
    assert resp["allowed"] is False
    msg = resp["status"]["message"]
    assert msg.startswith(f'{KEY}: "{value}" {problem}; allowed: a duration')
    assert 'such as "30m"' in msg


def test_a_bad_interval_on_the_pod_template_is_refused() -> None:
    res, _ = checked(_job_review(_job({"corral.dev/gang": "train"}, {KEY: "often"})))
    msg = res.review["response"]["status"]["message"]
    assert f'{KEY}: "often" is not a duration' in msg


def test_a_bad_interval_on_a_pod_that_is_no_gang_is_refused() -> None:
    res, _ = checked(review(bare_pod("p", {KEY: "soon"})))
    resp = res.review["response"]
    assert resp["allowed"] is False
    assert resp["status"]["message"].startswith(f'{KEY}: "soon" is not a duration')


def test_a_good_interval_is_allowed_and_left_on_the_object() -> None:
    res, after = checked(_job_review(_job({KEY: "30m"}, {KEY: "1h30m"})))
    assert res.review["response"]["allowed"] is True
    assert after["metadata"]["annotations"][KEY] == "30m"
    assert after["spec"]["template"]["metadata"]["annotations"][KEY] == "1h30m"


def test_an_update_is_not_refused_for_what_the_object_was_created_with() -> None:
    res, _ = checked(review(bare_pod("p", {KEY: "soon"}), operation="UPDATE"))
    assert res.review["response"]["allowed"] is True
