"""Issue 26, the webhook's part: what a new user trips on -- the skip key's values, the
skip key on a Job's pod template, config messages in the user's keys, and the demo on
a fixture folder with a broken file. Each case failed before the fix."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from gangplace.config_errors import ConfigError

from tests.builders.reviews import fixture
from webhook.admission.entry import admit
from webhook.cli import main
from webhook.config import WebhookConfig, load_config

SKIP = "corral.dev/skip"


@pytest.mark.parametrize("value", ["yes", "1", "on", ""])
@pytest.mark.parametrize("name", ["pod-create-llm-worker-0.json", "job-create-mpi-train.json"])
def test_a_skip_value_other_than_true_or_false_is_refused(name: str, value: str) -> None:
    rev = fixture(name)
    rev["request"]["object"]["metadata"].setdefault("annotations", {})[SKIP] = value
    res = admit(rev, None, WebhookConfig())
    assert res.outcome == "denied"
    assert res.review["response"]["status"]["message"] == (
        f'{SKIP}: "{value}" is not "true" or "false"; allowed: "true" (the webhook leaves '
        'the object alone) or "false"'
    )


@pytest.mark.parametrize("value", ["TRUE", " true "])
def test_true_in_any_case_still_skips(value: str) -> None:
    rev = fixture("pod-create-llm-worker-0.json")
    rev["request"]["object"]["metadata"]["annotations"][SKIP] = value
    assert admit(rev, None, WebhookConfig()).outcome == "skipped"


def test_a_bad_skip_value_does_not_block_an_update() -> None:
    rev = fixture("job-create-mpi-train.json")
    rev["request"]["operation"] = "UPDATE"
    rev["request"]["oldObject"] = copy.deepcopy(rev["request"]["object"])
    rev["request"]["object"]["metadata"]["annotations"][SKIP] = "yes"
    assert admit(rev, None, WebhookConfig()).outcome != "denied"


def test_skip_on_the_jobs_pod_template_skips_the_job() -> None:
    rev = fixture("job-create-mpi-train.json")
    tmpl_meta = rev["request"]["object"]["spec"]["template"]["metadata"]
    tmpl_meta.setdefault("annotations", {})[SKIP] = "true"
    res = admit(rev, None, WebhookConfig())
    assert res.outcome == "skipped"
    assert res.patch == [] and not res.intents


def test_a_bad_skip_value_on_a_template_is_refused_naming_the_template() -> None:
    rev = fixture("job-create-mpi-train.json")
    tmpl_meta = rev["request"]["object"]["spec"]["template"]["metadata"]
    tmpl_meta.setdefault("annotations", {})[SKIP] = "1"
    res = admit(rev, None, WebhookConfig())
    assert res.outcome == "denied"
    assert res.review["response"]["status"]["message"] == (
        f'worker template: {SKIP}: "1" is not "true" or "false"; allowed: "true" (the '
        'webhook leaves the object alone) or "false"'
    )


def _config(tmp_path: Path, text: str) -> str:
    f = tmp_path / "webhook.yaml"
    f.write_text(text)
    with pytest.raises(ConfigError) as e:
        load_config(f)
    return str(e.value).removeprefix(f"{f}: ")


@pytest.mark.parametrize(
    ("text", "before", "after"),
    [
        (
            'defaultMinAvailable: {"*": 3}\n',
            "Input should be a valid string",
            "defaultMinAvailable.*: 3 is not a string; allowed: a string; in YAML quote it, "
            'such as "3"',
        ),
        (
            "excludedNamespaces: kube-system\n",
            "Input should be a valid tuple",
            'excludedNamespaces: "kube-system" is not a list; allowed: a list, such as '
            "[kube-system]",
        ),
        (
            'defaultMinAvailable: {"*": "150%"}\n',
            "(the gang size)",
            'defaultMinAvailable.*: "150%" is not a percentage from 1% to 100%; allowed: a '
            'whole number of pods, at least 1, such as "4", or a percentage from 1% to 100%, '
            'such as "80%"',
        ),
        (
            'defaultMinAvailable: {"*": "-1"}\n',
            "neither a number of pods nor a percentage",
            'defaultMinAvailable.*: "-1" is negative; allowed: a whole number of pods, at '
            'least 1, such as "4", or a percentage from 1% to 100%, such as "80%"',
        ),
        (
            "policy: bin-pack\n",
            "policy: policy:",
            'policy: "bin-pack" is not a placement policy; allowed: dotprod, gpuclustering, '
            "gpupacking, bestfit, fgd, binpack, spread, corral",
        ),
        (
            "gangTimeout: soon\n",
            "gangTimeout: gangTimeout:",
            'gangTimeout: "soon" is not a duration; allowed: a positive duration made of '
            'numbers with the units h, m or s, such as "30m", "1h30m" or "90s"',
        ),
        (
            "nodePool: {key: k, valeu: v}\n",
            "Field required",
            "nodePool.value: is missing; nodePool.valeu: unknown key; allowed: key, value",
        ),
    ],
)
def test_config_messages_speak_of_the_users_keys(
    tmp_path: Path, text: str, before: str, after: str
) -> None:
    message = _config(tmp_path, text)
    assert message == after
    assert before not in message


def test_the_demo_refuses_a_truncated_fixture_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = json.dumps(fixture("pod-create-plain-cpu.json"))
    (tmp_path / "a.json").write_text(good)
    (tmp_path / "b.json").write_text(good[: len(good) // 2])
    assert main(["demo", "--fixtures", str(tmp_path)]) == 2
    out, err = capsys.readouterr()
    assert out == ""  # nothing started, nothing posted
    assert err.startswith(f"corral-webhook: {tmp_path / 'b.json'}: not JSON (")
    assert err.count("\n") == 1


def test_the_demo_refuses_json_that_is_no_admission_review(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "a.json").write_text("[1, 2]")
    assert main(["demo", "--fixtures", str(tmp_path)]) == 2
    assert "not an AdmissionReview" in capsys.readouterr().err
