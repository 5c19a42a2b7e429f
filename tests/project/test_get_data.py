"""`make data` (``python -m scripts.get_data``): what it fetches from where, what it keeps, and the
error it gives where there is no internet -- without the network: a fake opener stands
in for it."""

from __future__ import annotations

import hashlib
import io
import urllib.error
from pathlib import Path
from typing import Any

import pytest
from gangplace.thirdparty import crds_dir, trace_dir

from scripts import get_data

ROOT = Path(__file__).resolve().parents[2]


def never(url: str, timeout: float) -> Any:
    raise AssertionError(f"fetched {url}")


def serving(body: bytes) -> Any:
    seen: list[str] = []

    def opener(url: str, timeout: float) -> Any:
        seen.append(url)
        return io.BytesIO(body)

    opener.seen = seen  # type: ignore[attr-defined]
    return opener


def test_list_names_every_file_and_its_public_source(capsys: pytest.CaptureFixture[str]) -> None:
    assert get_data.main(["--list"], opener=never) == 0
    rows = [line.split("  ") for line in capsys.readouterr().out.splitlines()]
    assert len(rows) == 26 + 17
    for path, url in rows:
        assert url.startswith("https://raw.githubusercontent.com/") and url.endswith(
            Path(path).name
        )
    trace = [u for p, u in rows if p.startswith("data/alibaba-gpu-v2023/")]
    assert len(trace) == 26 and all("/alibaba/clusterdata/50a91c7c" in u for u in trace)
    assert any(p == "crds/kueue.x-k8s.io_workloads.yaml" and "/v0.17.8/" in u for p, u in rows)


def test_only_picks_a_part(capsys: pytest.CaptureFixture[str]) -> None:
    assert get_data.main(["--list", "--only", "crds"], opener=never) == 0
    paths = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert len(paths) == 17 and all(p.startswith("crds/") for p in paths)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--only", "fixtures"], "invalid choice: 'fixtures'"),
        (["--timeout", "0"], "--timeout 0: must be more than 0"),
        (["--timeout", "soon"], "invalid float value: 'soon'"),
    ],
)
def test_bad_arguments_exit_2_naming_them(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as e:
        get_data.main(argv, opener=never)
    assert e.value.code == 2 and message in capsys.readouterr().err


def test_dest_that_is_a_file_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "f").write_text("")
    with pytest.raises(SystemExit) as e:
        get_data.main(["--dest", str(tmp_path / "f")], opener=never)
    assert e.value.code == 2 and "not a folder" in capsys.readouterr().err


def test_default_dest_is_corral_data_else_shared_beside_the_checkout(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("CORRAL_DATA", str(tmp_path))
    assert get_data.default_dest() == tmp_path
    monkeypatch.delenv("CORRAL_DATA")
    assert get_data.default_dest() == ROOT.parent / "shared"


def test_files_already_there_are_kept_and_nothing_is_fetched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for it in get_data.items(["trace", "crds"]):
        (tmp_path / it.path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / it.path).write_text("mine")
    assert get_data.main(["--dest", str(tmp_path)], opener=never) == 0
    assert "43 of 43 files present" in capsys.readouterr().out
    assert (tmp_path / "crds/ray.io_rayjobs.yaml").read_text() == "mine"


def test_no_internet_is_a_clear_error_and_leaves_no_part_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def offline(url: str, timeout: float) -> Any:
        raise urllib.error.URLError("[Errno -2] Name or service not known")

    assert get_data.main(["--dest", str(tmp_path), "--only", "trace"], opener=offline) == 1
    err = capsys.readouterr().err
    first = get_data.items(["trace"])[0]
    assert f"could not fetch {first.url}: [Errno -2] Name or service not known" in err
    assert str(tmp_path / first.path) in err and "$CORRAL_DATA" in err
    assert list(tmp_path.rglob("*.part")) == [] and list(tmp_path.rglob("*.csv")) == []
    # Every missing file is counted, and the command that lists them all is named.
    n = len(get_data.items(["trace"]))
    assert f"{n} file(s) are missing, the first {tmp_path / first.path}" in err
    assert "`python -m scripts.get_data --list --only trace` names each file" in err


def test_fetched_files_land_where_the_tests_look(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    body = b"sn,cpu_milli,memory_mib,gpu,model\n"
    opener = serving(body)
    assert get_data.main(["--dest", str(tmp_path), "--only", "crds"], opener=opener) == 0
    assert len(opener.seen) == 17
    out, err = capsys.readouterr()
    assert "[17/17] differs crds/sparkoperator.k8s.io_sparkapplications.yaml" in out
    assert "17 file(s) differ from the copies corral was tested with (kept)" in err
    monkeypatch.setenv("CORRAL_DATA", str(tmp_path))
    assert crds_dir() == tmp_path / "crds"
    # A file whose checksum is the tested copy's is "fetched".
    item = get_data.Item("data/alibaba-gpu-v2023/x.csv", "u", hashlib.sha256(body).hexdigest())
    assert get_data.fetch(item, tmp_path, 1.0, serving(body)) == "fetched"
    assert (tmp_path / item.path).read_bytes() == body


@pytest.mark.trace
@pytest.mark.crds
def test_the_checksums_are_those_of_the_data_tested_here() -> None:
    trace, crds = trace_dir(ROOT), crds_dir(ROOT)
    assert trace is not None and crds is not None

    for it in get_data.items(["trace"]):
        assert hashlib.sha256((trace / Path(it.path).name).read_bytes()).hexdigest() == it.sha256
    for it in get_data.items(["crds"]):
        assert hashlib.sha256((crds / Path(it.path).name).read_bytes()).hexdigest() == it.sha256
