"""The copy-on-write JSON patch editor: RFC 6901 escaping, missing parents, and -- as a
property -- that its patch, applied by a JSON-patch library, gives the edited object."""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from webhook.admission.patch import Editor, PatchError, escape, pointer


def test_escaping() -> None:
    assert escape("scheduling.k8s.io/group-name") == "scheduling.k8s.io~1group-name"
    assert escape("a~b/c") == "a~0b~1c"
    assert pointer(("metadata", "annotations", "x/y~z")) == "/metadata/annotations/x~1y~0z"
    assert pointer(("spec", "items", 3)) == "/spec/items/3"


def test_map_changes_are_per_key() -> None:
    obj = {"metadata": {"annotations": {"keep": "1", "change": "a"}}}
    ed = Editor(obj)
    m = ed.map(("metadata", "annotations"))
    m["change"] = "b"
    m["new/key"] = "c"
    assert ed.ops() == [
        {"op": "replace", "path": "/metadata/annotations/change", "value": "b"},
        {"op": "add", "path": "/metadata/annotations/new~1key", "value": "c"},
    ]
    assert obj == {"metadata": {"annotations": {"keep": "1", "change": "a"}}}  # untouched
    assert ed.get(("metadata", "annotations", "new/key")) == "c"


def test_missing_parents_are_added_once() -> None:
    obj: dict[str, Any] = {"spec": {"template": {"spec": {}}}}
    ed = Editor(obj)
    ed.map(("spec", "template", "metadata", "annotations"))["a"] = "1"
    ed.map(("spec", "template", "metadata", "labels"))["b"] = "2"
    ed.set(("spec", "template", "spec", "schedulerName"), "volcano")
    ops = ed.ops()
    assert ops == [
        {
            "op": "add",
            "path": "/spec/template/metadata",
            "value": {"annotations": {"a": "1"}, "labels": {"b": "2"}},
        },
        {"op": "add", "path": "/spec/template/spec/schedulerName", "value": "volcano"},
    ]
    assert jsonpatch.apply_patch(obj, ops)["spec"]["template"]["metadata"]["labels"] == {"b": "2"}


def test_untouched_maps_make_no_ops() -> None:
    ed = Editor({"metadata": {}})
    ed.map(("metadata", "annotations"))
    ed.set(("spec",), None)
    assert ed.ops() == []


def test_null_value_is_replaced_by_add() -> None:
    obj = {"metadata": {"annotations": None}}
    ed = Editor(obj)
    ed.map(("metadata", "annotations"))["a"] = "1"
    ops = ed.ops()
    assert ops == [{"op": "add", "path": "/metadata/annotations", "value": {"a": "1"}}]
    assert jsonpatch.apply_patch(obj, ops) == {"metadata": {"annotations": {"a": "1"}}}


def test_tree_edits_are_whole_values() -> None:
    obj = {"spec": {"affinity": {"nodeAffinity": {"x": [1]}}}}
    ed = Editor(obj)
    t = ed.tree(("spec", "affinity"))
    t["nodeAffinity"]["x"].append(2)
    ed.set(("spec", "affinity"), t)
    assert obj["spec"]["affinity"]["nodeAffinity"]["x"] == [1]
    assert ed.ops() == [
        {"op": "replace", "path": "/spec/affinity", "value": {"nodeAffinity": {"x": [1, 2]}}}
    ]


def test_errors() -> None:
    ed = Editor({"metadata": "oops"})
    ed.map(("metadata", "annotations"))["a"] = "1"
    with pytest.raises(PatchError, match="/metadata: expected an object"):
        ed.ops()
    ed = Editor({"metadata": {"annotations": {}}})
    ed.map(("metadata", "annotations"))
    with pytest.raises(PatchError, match="overlapping"):
        ed.set(("metadata",), {})
    ed = Editor({"a": {"b": 3}})
    with pytest.raises(PatchError, match="expected an object"):
        ed.map(("a", "b"))


# --- property: the patch reproduces the edits -------------------------------------------

_keys = st.sampled_from(["a", "b", "x/y", "t~1", "metadata", "spec", "k.io/n"])
_leaf = st.one_of(st.none(), st.integers(-3, 3), st.text(max_size=3))
_json = st.recursive(
    _leaf,
    lambda inner: st.dictionaries(_keys, inner, max_size=3),
    max_leaves=12,
)
_paths = st.lists(_keys, min_size=1, max_size=4).map(tuple)


def _set_in(obj: Any, path: tuple[str, ...], value: Any) -> None:
    node = obj
    for seg in path[:-1]:
        if not isinstance(node.get(seg), dict):
            node[seg] = {}
        node = node[seg]
    node[path[-1]] = value


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(_keys, _json, max_size=4),
    st.lists(
        st.tuples(st.booleans(), _paths, st.dictionaries(_keys, st.text(max_size=2), max_size=3)),
        max_size=4,
    ),
)
def _patch_reproduces_the_edits(obj: dict[str, Any], edits: list[Any]) -> None:
    original = copy.deepcopy(obj)
    ed = Editor(obj)
    expected = copy.deepcopy(obj)
    for as_map, path, content in edits:
        try:
            if as_map:
                m = ed.map(path)
                m.update(content)
                if content:  # an empty untouched map makes no change
                    node = expected
                    for seg in path:
                        if not isinstance(node.get(seg), dict):
                            node[seg] = {}
                        node = node[seg]
                    node.update(content)
            else:
                ed.set(path, content)
                _set_in(expected, path, content)
        except PatchError:
            return  # overlapping edits or a non-object on the way: refused, fine
    try:
        ops = ed.ops()
    except PatchError:
        return
    assert obj == original
    assert jsonpatch.apply_patch(obj, ops) == expected
    REACHED.append(len(ops))


REACHED: list[int] = []


@pytest.mark.slow
def test_patch_applies_to_give_the_edits() -> None:
    REACHED.clear()
    _patch_reproduces_the_edits()
    # Refused edit sets return early; most examples must get to the check.
    assert sum(1 for n in REACHED if n) >= 100
