"""Tests that need third-party data corral does not ship (marked ``trace`` or ``crds``)
run only where it is found (``$CORRAL_DATA``, else ``../shared``: see
:mod:`gangplace.thirdparty`). Where it is not, they are left out of the run -- never
skipped one by one -- and one line at the end of the run counts them and says how to get
the data. Tests that drive a real ``kubectl`` (marked ``kubectl``) are left out and
counted the same way where none is on PATH. The hooks are imported by ``conftest.py``."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from gangplace.thirdparty import (
    DATA_ENV,
    TRACE_ENV,
    TRACE_NODE_FILE,
    crds_dir,
    trace_dir,
)

ROOT = Path(__file__).resolve().parent.parent

LEFT_OUT = pytest.StashKey[dict[str, int]]()


def _have_trace() -> bool:
    found = trace_dir(ROOT)
    return found is not None and (found / TRACE_NODE_FILE).is_file()


def _have_crds() -> bool:
    return crds_dir(ROOT) is not None


def _have_handout() -> bool:
    return (ROOT.parent / "shared" / "recordings").is_dir()


def _have_kubectl() -> bool:
    return shutil.which("kubectl") is not None


# marker -> (is the data there, what is missing)
DATA_MARKERS = {
    "trace": (_have_trace, "no trace"),
    "crds": (_have_crds, "no CRDs"),
    "handout": (_have_handout, "no handout"),
    "kubectl": (_have_kubectl, "no kubectl on PATH"),
}
# Markers whose missing piece is not data: each says on its own how to get it.
_OWN_WORDS = {
    "handout": "no ../shared/recordings to compare tests/recordings with (a developer's "
    "checkout has the handout beside it)",
    "kubectl": "no kubectl on PATH; `apt-get install kubectl` gets it",
}


def where_looked() -> str:
    """Where the data was looked for, as the closing line says it."""
    if os.environ.get(DATA_ENV):
        return f"${DATA_ENV} ({os.environ[DATA_ENV]})"
    return "../shared"


def closing_line(left_out: dict[str, int]) -> str:
    """``9 trace tests not run: no trace in ../shared; `make data` gets it`` (all data
    markers in one line; the handout and kubectl ones after, in their own words)."""
    tail = "; ".join(
        f"{n} {marker} test{'s' if n != 1 else ''} not run: {_OWN_WORDS[marker]}"
        for marker in _OWN_WORDS
        if (n := left_out.get(marker, 0))
    )
    left_out = {m: n for m, n in left_out.items() if m not in _OWN_WORDS}
    if not left_out:
        return tail
    parts = [
        f"{n} {marker} test{'s' if n != 1 else ''} not run: {DATA_MARKERS[marker][1]}"
        for marker, n in left_out.items()
    ]
    where = where_looked()
    if "trace" in left_out and os.environ.get(TRACE_ENV):
        where += f" or ${TRACE_ENV} ({os.environ[TRACE_ENV]})"
    it = "them" if len(parts) > 1 else "it"
    line = f"{'; '.join(parts)} in {where}; `make data` gets {it}"
    return f"{line}; {tail}" if tail else line


@pytest.hookimpl(trylast=True)  # after -m/-k have chosen: count only what would have run
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    missing = {m for m, (present, _) in DATA_MARKERS.items() if not present()}
    left_out: dict[str, int] = {}
    kept: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        needs = [m for m in DATA_MARKERS if m in missing and item.get_closest_marker(m)]
        if needs:
            left_out[needs[0]] = left_out.get(needs[0], 0) + 1
            dropped.append(item)
        else:
            kept.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept
    config.stash[LEFT_OUT] = left_out


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config
) -> None:
    left_out = config.stash.get(LEFT_OUT, {})
    if left_out:
        terminalreporter.write_line(closing_line(left_out))
