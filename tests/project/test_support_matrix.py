"""docs/support-matrix.md is what the tests play: generated from tests/played.py, which
the tests that play a stack take it from; the install guide and the backends page quote
it instead of tables of their own; the kind guide pins a pair the tests play."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from scripts import gen_support_matrix
from tests.kubeapi.versions import Release
from tests.played import (
    CONTROLLERS,
    KIND_STACK,
    KUBE_RELEASES,
    RECORDED,
    VOLCANO_NEWEST_KUBE,
    VOLCANO_RELEASES,
    VOLCANO_STORY,
    in_volcano_table,
)
from tests.scenarios import test_volcano_admission

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def test_the_page_is_generated_from_what_the_tests_play() -> None:
    assert gen_support_matrix.PAGE.read_text() == gen_support_matrix.page(), (
        "docs/support-matrix.md is out of date: run `make manifests`"
    )
    assert gen_support_matrix.main(["--check"]) == 0


def test_every_cell_says_what_it_rests_on() -> None:
    # Volcano's table is known for every Volcano release the server plays.
    assert set(VOLCANO_NEWEST_KUBE) == set(VOLCANO_RELEASES)
    played = {(v.kube, v.volcano) for v in VOLCANO_STORY}
    for kube in KUBE_RELEASES:
        for volcano in VOLCANO_RELEASES:
            cell = gen_support_matrix.pair_cell(kube, volcano)
            if (kube, volcano) == (RECORDED.kube, RECORDED.volcano):
                assert cell.startswith("recorded")
            elif (kube, volcano) in played:
                assert cell.startswith("modelled")
            elif in_volcano_table(kube, volcano):
                assert cell == "untested"
            else:
                assert cell == "·"
    grid = gen_support_matrix.PAGE.read_text().split("## Kubernetes x Volcano", 1)[1]
    rows = [r for r in grid.splitlines() if re.match(r"\| 1\.\d+ \|", r)]
    assert [r.split("|")[1].strip() for r in rows] == [str(k) for k in KUBE_RELEASES]


def test_the_tests_play_the_stacks_the_matrix_names() -> None:
    assert list(VOLCANO_STORY) == test_volcano_admission.STACKS
    # Every pair of the story is one Volcano's own table lists.
    for v in VOLCANO_STORY:
        assert v.volcano is not None and in_volcano_table(v.kube, v.volcano), v
    readme = (ROOT / "tests/recordings/README.md").read_text()
    assert f"v{RECORDED.kube}.7" in readme and f"Volcano v{RECORDED.volcano}.0" in readme


def test_each_controller_model_names_the_release_it_was_read_from() -> None:
    for c in CONTROLLERS:
        doc = ast.get_docstring(ast.parse((ROOT / c.model).read_text())) or ""
        words = " ".join(doc.split())
        assert c.version in words, f"{c.model} does not say {c.version}"
        assert c.also_read in words, f"{c.model} does not say {c.also_read}"


def test_install_and_backends_quote_the_matrix() -> None:
    install = (DOCS / "install.md").read_text()
    backends = (DOCS / "backends.md").read_text()
    for text in (install, backends):
        assert "(support-matrix.md)" in text
        assert not re.search(r"1\.\d+ up to 1\.\d+", text), "a version table of its own"
    first, last = KUBE_RELEASES[0], KUBE_RELEASES[-1]
    assert f"Kubernetes {first} to {last} (" in install
    # With Volcano, the newest Kubernetes its table lists, for its newest release.
    newest = max(VOLCANO_NEWEST_KUBE)
    assert (
        f"Volcano {newest}, lists Kubernetes releases through\n  {VOLCANO_NEWEST_KUBE[newest]} "
        in install
    )
    # The old tables are gone from the install guide.
    assert "| Volcano | 1.7" not in install and "| Job controller |" not in install


def test_the_kind_guide_pins_a_pair_the_tests_play() -> None:
    assert KIND_STACK in VOLCANO_STORY and KIND_STACK.volcano is not None
    assert in_volcano_table(KIND_STACK.kube, KIND_STACK.volcano)
    example = (ROOT / "examples/kind-cluster.yaml").read_text()
    images = set(re.findall(r"image: (\S+)", example))
    [image] = images
    m = re.fullmatch(r"kindest/node:v(\d+\.\d+)\.\d+@sha256:[0-9a-f]{64}", image)
    assert m, image
    assert Release.parse(m.group(1)) == KIND_STACK.kube
    kind = (DOCS / "install.md").read_text().split("## Try it on kind", 1)[1]
    kind = kind.split("\n## ", 1)[0]
    [volcano] = re.findall(r"volcano-sh/volcano/v(\d+\.\d+)\.\d+/installer", kind)
    assert Release.parse(volcano) == KIND_STACK.volcano
    assert "v1.31.x" not in kind and ".x`" not in kind, "no placeholder image"
    assert f"Volcano {KIND_STACK.volcano}" in gen_support_matrix.page()
