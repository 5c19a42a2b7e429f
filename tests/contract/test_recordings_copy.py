"""The project's copy of the recordings (tests/recordings/) is the handout's, byte for
byte, wherever the handout is beside the checkout; on a user's clone there is none to
compare with, and the run's closing line counts it (marker ``handout``)."""

from __future__ import annotations

import pytest

from tests.kubeapi.recording import HANDOUT_RECORDINGS, RECORDINGS


def test_the_copy_holds_every_recording_the_contract_tests_replay() -> None:
    names = {p.stem for p in RECORDINGS.glob("*.json")}
    replayed = {
        p.stem.removeprefix("test_").replace("_", "-")
        for p in RECORDINGS.parent.joinpath("contract").glob("test_*.py")
    }
    # every contract test named for a recording finds it in the copy
    assert {n for n in replayed if n in names or n.replace("-", "_") in names} <= names
    assert len(names) >= 15
    assert (RECORDINGS / "README.md").is_file()


@pytest.mark.handout
def test_the_copy_equals_the_handout() -> None:
    theirs = {p.name: p.read_bytes() for p in HANDOUT_RECORDINGS.glob("*.json")}
    ours = {p.name: p.read_bytes() for p in RECORDINGS.glob("*.json")}
    assert sorted(ours) == sorted(theirs)
    changed = [n for n in ours if ours[n] != theirs[n]]
    assert not changed, f"differ from ../shared/recordings: {changed}"
