"""User values and the config file: what is accepted, and messages that name the key,
the value and what is allowed."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from gangplace.config_errors import ConfigError
from gangplace.engine import timeparse
from hypothesis import given
from hypothesis import strategies as st

from webhook.admission.validate import (
    InvalidValue,
    check_duration,
    check_gang_name,
    check_queue,
    derived_name,
    format_duration,
    parse_min_available,
)
from webhook.config import Backend, WebhookConfig, load_config

KEY = "corral.dev/min-available"


@pytest.mark.parametrize(
    ("raw", "size", "pods"),
    [
        ("8", 8, 8),
        ("1", 8, 1),
        ("80%", 10, 8),
        ("81%", 10, 9),
        ("1%", 10, 1),
        ("100%", 7, 7),
        (" 3 ", 4, 3),
    ],
)
def test_min_available_accepted(raw: str, size: int, pods: int) -> None:
    assert parse_min_available(KEY, raw, size).resolve(size) == pods


@pytest.mark.parametrize(
    ("raw", "size", "problem"),
    [
        ("abc", 4, "is neither a number of pods nor a percentage"),
        ("0", 4, "is too small: a gang needs at least 1 pod"),
        ("0%", 4, "is not a percentage from 1% to 100%"),
        ("150%", 4, "is not a percentage from 1% to 100%"),
        ("5", 4, "is more than the gang size 4"),
        ("2.5", 4, "is neither"),
        ("", 4, "is neither"),
        ("80%", None, "is a percentage, but a pod on its own does not know"),
        ("2147483648", None, "is too large: at most 2147483647 pods"),
    ],
)
def test_min_available_refused(raw: str, size: int | None, problem: str) -> None:
    with pytest.raises(InvalidValue) as info:
        parse_min_available(KEY, raw, size)
    msg = str(info.value)
    assert msg.startswith(f'{KEY}: "{raw}" {problem}')
    assert "; allowed: " in msg
    if size is not None:
        assert f"from 1 to {size} (the gang size)" in msg and "from 1% to 100%" in msg


@given(st.integers(1, 10_000), st.integers(1, 100))
def test_percentages_round_up_within_the_gang(size: int, pct: int) -> None:
    n = parse_min_available(KEY, f"{pct}%", size).resolve(size)
    assert 1 <= n <= size
    assert n * 100 >= size * pct and (n - 1) * 100 < max(size * pct, 100)


@pytest.mark.parametrize(
    ("raw", "seconds"),
    [
        ("30m", 1800),
        ("1h30m", 5400),
        ("90s", 90),
        ("1.5h", 5400),
        ("2h0m5s", 7205),
        ("0.5s", 1),
        (".5h", 1800),
        ("1500ms", 2),
        ("1m500ms", 61),
        ("2000000us", 2),
        ("1h1ns", 3601),
    ],
)
def test_durations(raw: str, seconds: int) -> None:
    assert check_duration("corral.dev/gang-timeout", raw) == seconds


@pytest.mark.parametrize(
    "raw", ["30", "abc", "-5m", "1d", "", "m", "0s", "1h 30m", "99999999999h", "1.5", "h1"]
)
def test_bad_durations(raw: str) -> None:
    with pytest.raises(InvalidValue) as info:
        check_duration("corral.dev/gang-timeout", raw)
    msg = str(info.value)
    assert msg.startswith(f'corral.dev/gang-timeout: "{raw}"')
    assert '"30m", "1h30m" or "90s"' in msg


@given(st.text(alphabet="0123456789.hmsun -", max_size=12))
def test_the_webhook_and_the_descheduler_read_a_timeout_alike(raw: str) -> None:
    """corral.dev/gang-timeout is read by both; a value one takes, the other takes too."""
    try:
        seconds = timeparse.parse_duration(raw, numbers=False)
    except timeparse.DurationError:
        with pytest.raises(InvalidValue):
            check_duration("corral.dev/gang-timeout", raw)
        return
    if 0 < seconds <= 2**31 - 1:
        assert check_duration("corral.dev/gang-timeout", raw) == math.ceil(seconds)
    else:  # zero, or longer than a backend's field holds
        with pytest.raises(InvalidValue, match=r"too short|too long"):
            check_duration("corral.dev/gang-timeout", raw)


@given(st.integers(1, 2**31 - 1))
def test_format_duration_round_trips(seconds: int) -> None:
    assert check_duration("k", format_duration(seconds)) == seconds


def test_names() -> None:
    assert check_gang_name("k", "llm-7b.v2") == "llm-7b.v2"
    for bad in ("LLM", "a_b", "-a", "a-", "x" * 64, ""):
        with pytest.raises(InvalidValue, match="is not a valid gang name; allowed: up to 63"):
            check_gang_name("corral.dev/gang", bad)
    assert check_queue("k", "root.ml-team_a") == "root.ml-team_a"
    with pytest.raises(InvalidValue, match="is not a valid queue name"):
        check_queue("corral.dev/queue", "a queue")


@given(st.text(min_size=1, max_size=300))
def test_derived_names_are_always_valid(text: str) -> None:
    name = derived_name("Job", text)
    assert check_gang_name("k", name) == name
    assert derived_name("Job", text) == name


# --- the config file --------------------------------------------------------------------


def test_defaults_are_volcanos() -> None:
    cfg = load_config(None)
    assert cfg.backend is Backend.VOLCANO
    assert cfg.effective_scheduler_name == "volcano"
    assert cfg.queue_for("anything") == "default"
    assert cfg.infeasible == "warn" and cfg.non_gang_pods == "single-pod-gang"
    assert cfg.skipped_namespaces == {"kube-system", "corral-system"}
    assert cfg.min_available_for(None, "Job") == "100%"


def test_full_config_file(tmp_path: Path) -> None:
    f = tmp_path / "c.yaml"
    f.write_text(
        """
backend: yunikorn
schedulerName: yunikorn-gpu
defaultMinAvailable: {"*": "90%", MPIJob: "100%"}
namespaceQueues: {ml: root.ml}
defaultQueue: root.batch
nodePool: {key: scheduler.volcano.sh/enable, value: "true"}
infeasible: deny
warnWhenFull: true
nonGangPods: ignore
gangTimeout: 45m
excludedNamespaces: [kube-system, monitoring]
ownNamespace: corral
engine: {gpu_resources: [nvidia.com/gpu]}
"""
    )
    cfg = load_config(f)
    assert cfg.backend is Backend.YUNIKORN
    assert cfg.effective_scheduler_name == "yunikorn-gpu"
    assert cfg.queue_for("ml") == "root.ml" and cfg.queue_for("x") == "root.batch"
    assert cfg.node_pool is not None and cfg.node_pool.key == "scheduler.volcano.sh/enable"
    assert cfg.timeout_seconds == 2700
    assert cfg.skipped_namespaces == {"kube-system", "monitoring", "corral"}
    assert cfg.engine.gpu_resources == ("nvidia.com/gpu",)


@pytest.mark.parametrize(
    ("text", "fragments"),
    [
        ("backend: volcan\n", ["backend:", "'volcano'"]),
        ("schedulerNmae: x\n", ["schedulerNmae: unknown key"]),
        ("gangTimeout: soon\n", ["gangTimeout", '"soon" is not a duration']),
        ("defaultMinAvailable: {Job: '0'}\n", ["defaultMinAvailable", '"0" is too small']),
        ("namespaceQueues: {ml: 'a b'}\n", ["namespaceQueues", "namespaceQueues.ml"]),
        ("infeasible: block\n", ["infeasible:", "'warn' or 'deny'"]),
        ("nodePool: {key: k}\n", ["nodePool.value"]),
        (
            "workloads: [{group: g, versions: [v1], kind: K, roles: [{at: spec, template: t}]}]\n",
            ["needs a name"],
        ),
        ("- a\n- b\n", ["expected a mapping"]),
        ("a: [\n", ["not valid YAML: line 2, column 1:"]),
        ("gangTimeout: " + "9" * 400 + "h\n", ["gangTimeout", "is too long"]),
        (
            "defaultMinAvailable: {Job: '" + "9" * 5000 + "'}\n",
            ["is too large", "(5000 characters)"],
        ),
    ],
)
def test_config_errors_name_the_field(tmp_path: Path, text: str, fragments: list[str]) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config(f)
    msg = str(info.value)
    assert msg.startswith(str(f))
    for frag in fragments:
        assert frag in msg, msg


def test_missing_config_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="No such file"):
        load_config(tmp_path / "nope.yaml")


def test_empty_config_file(tmp_path: Path) -> None:
    f = tmp_path / "empty.yaml"
    f.write_text("")
    assert load_config(f) == WebhookConfig()


@pytest.mark.parametrize(
    ("raw", "size"),
    [("9" * 5000, None), ("9" * 5000, 8), ("9" * 5000 + "%", 8), ("+" + "0" * 30 + "3", 4)],
)
def test_huge_counts_are_refused_or_read_not_crashed(raw: str, size: int | None) -> None:
    """Python refuses to convert thousands of digits; the user gets a refusal instead."""
    try:
        parse_min_available(KEY, raw, size)
    except InvalidValue as e:
        assert len(str(e)) < 300, "the value is quoted cut, not whole"


@pytest.mark.parametrize("raw", ["9" * 400 + "h", "596524h", "9" * 20 + "s"])
def test_huge_durations_are_refused(raw: str) -> None:
    with pytest.raises(InvalidValue, match="is too long: at most 2147483647s"):
        check_duration(KEY, raw)


def test_long_values_are_not_kept_in_the_parse_caches() -> None:
    """An annotation may hold 256 KiB; caching such values would let requests fill the
    webhook's memory. Valid values are short, so only short ones are cached."""
    from webhook.admission import validate

    before = (
        validate._parse_min_cached.cache_info().currsize,
        validate._parse_duration_cached.cache_info().currsize,
    )
    for i in range(1, 50):
        assert parse_min_available(KEY, " " * 10_000 + str(i), None).count == i
        assert check_duration(KEY, "1s" * 5_000 + f"{i}s") == 5_000 + i
    after = (
        validate._parse_min_cached.cache_info().currsize,
        validate._parse_duration_cached.cache_info().currsize,
    )
    assert after == before
