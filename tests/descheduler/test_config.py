"""The descheduler's YAML config: defaults for everything, clear errors naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from descheduler import ConfigError, DeschedulerConfig, load_config, parse_config
from descheduler.config import render_defaults


def test_no_file_and_an_empty_file_give_the_defaults(tmp_path: Path) -> None:
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    assert load_config(None) == DeschedulerConfig() == load_config(empty)
    d = DeschedulerConfig()
    assert d.limits.max_evictions_per_run == 50
    assert d.eviction.cooldown == 3600.0
    assert d.stale_gangs.default_timeout == 1800.0
    assert d.scheduling.policy == "binpack"
    assert d.eviction.excluded_namespaces == ["kube-system"]


def test_a_full_file_is_read(tmp_path: Path) -> None:
    f = tmp_path / "c.yaml"
    f.write_text(
        """
scheduling:
  policy: fgd
  topology_key: topology.kubernetes.io/zone
eviction:
  cooldown: 2h30m
  excluded_namespaces: [kube-system, monitoring]
  evict_local_storage_pods: true
limits:
  max_evictions_per_run: 10
  max_gpus_disrupted_per_run: null
stale_gangs:
  default_timeout: 45m
runner:
  interval: 90
engine:
  overcommit: {cpu: 1.5}
"""
    )
    c = load_config(f)
    assert c.scheduling.policy == "fgd"
    assert c.eviction.cooldown == 9000.0
    assert c.limits.max_evictions_per_run == 10
    assert c.limits.max_gpus_disrupted_per_run is None
    assert c.stale_gangs.default_timeout == 2700.0
    assert c.runner.interval == 90.0
    assert c.engine.overcommit == {"cpu": 1.5}


@pytest.mark.parametrize(
    ("raw", "names"),
    [
        (
            {"limits": {"max_evicts": 3}},
            "limits.max_evicts: unknown key; allowed: max_evictions_per_run,",
        ),
        ({"limit": {}}, "limit: unknown key; allowed: engine, scheduling,"),
        ({"limits": {"max_evictions_per_run": -1}}, "limits.max_evictions_per_run"),
        ({"limits": {"max_evictions_per_node": "many"}}, "limits.max_evictions_per_node"),
        ({"eviction": {"cooldown": "an hour"}}, "eviction.cooldown"),
        ({"eviction": {"cooldown": "-5m"}}, "eviction.cooldown"),
        ({"scheduling": {"policy": "random"}}, "scheduling.policy"),
        ({"scheduling": {"weights": {"cpu": -1}}}, "scheduling.weights"),
        ({"defragment": {"workload_coverage": 0}}, "defragment.workload_coverage"),
        ({"engine": {"overcommit": {"nvidia.com/gpu": 2}}}, "engine"),
        ({"runner": {"interval": 0}}, "runner.interval"),
    ],
)
def test_errors_name_the_key(raw: dict[str, object], names: str) -> None:
    with pytest.raises(ConfigError) as e:
        parse_config(raw, "config c.yaml")
    assert names in str(e.value)
    assert str(e.value).startswith("config c.yaml")


def test_file_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"missing\.yaml"):
        load_config(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("limits: [unclosed")
    with pytest.raises(ConfigError, match="not valid YAML: line 1, column 18:") as e:
        load_config(bad)
    assert "\n" not in str(e.value)  # one line, for a pod's log
    tab = tmp_path / "tab.yaml"
    tab.write_text("runner:\n\tdry_run: true\n")
    with pytest.raises(ConfigError, match=r"tab\.yaml: not valid YAML: line 2, column 1: .*'\\t'"):
        load_config(tab)
    top = tmp_path / "top.yaml"
    top.write_text("- a list\n")
    with pytest.raises(ConfigError, match="mapping"):
        load_config(top)


def test_config_is_immutable() -> None:
    c = DeschedulerConfig()
    with pytest.raises(ValueError):
        c.limits.max_evictions_per_run = 3  # type: ignore[misc]


def test_the_reference_lists_every_key_documented_at_its_default() -> None:
    text = render_defaults()
    assert parse_config(yaml.safe_load(text)) == DeschedulerConfig()
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("  ") and not line.lstrip().startswith("#"):
            assert lines[i - 1].lstrip().startswith("#"), f"undocumented: {line}"
    for section in DeschedulerConfig.model_fields:
        assert f"\n{section}:" in text, section
