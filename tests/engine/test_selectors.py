"""Label and field selectors parse and match as the API server's do."""

import pytest
from gangplace.engine.selectors import FieldSelector, LabelSelector, SelectorError, field_value

LABELS = {"app": "web", "tier": "front", "env": ""}


@pytest.mark.parametrize(
    ("text", "matches"),
    [
        ("", True),
        ("app=web", True),
        ("app==web", True),
        ("app!=web", False),
        ("app=db", False),
        ("missing!=x", True),  # NotIn matches a missing key
        ("app in (web,db)", True),
        ("app notin (web)", False),
        ("tier notin (back)", True),
        ("app", True),
        ("!app", False),
        ("!missing", True),
        ("missing", False),
        ("env=", True),
        ("app=web,tier=front", True),
        ("app=web,tier=back", False),
        ("app in (db, web) , !missing", True),
        ("example.com/role", False),
    ],
)
def test_label_selector_matches(text: str, matches: bool) -> None:
    assert LabelSelector.parse(text).matches(LABELS) is matches


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("app=", None),  # valid: empty value
        ("app in ()", "at least one value"),
        ("app in (a", "missing ')'"),
        ("app in a", "expected '('"),
        ("app=web,", "trailing ','"),
        ("app=we b", "expected ','"),
        ("!", "must be followed by a key"),
        ("-bad=x", "not a valid label key"),
        ("app=-x-", "not a valid label value"),
        ("app > 3", "unexpected"),
    ],
)
def test_label_selector_errors_quote_the_selector(text: str, why: str | None) -> None:
    if why is None:
        LabelSelector.parse(text)
        return
    with pytest.raises(SelectorError) as err:
        LabelSelector.parse(text)
    assert repr(text) in str(err.value) and why in str(err.value)


def test_structured_selector() -> None:
    sel = LabelSelector.from_json(
        {
            "matchLabels": {"app": "web"},
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["front", "edge"]},
                {"key": "canary", "operator": "DoesNotExist"},
            ],
        }
    )
    assert sel.matches(LABELS)
    assert not sel.matches({**LABELS, "canary": "1"})
    assert not sel.matches({"app": "web"})
    assert LabelSelector.from_json({}).matches({})  # empty selects everything
    assert LabelSelector.from_json({}).empty
    assert not LabelSelector.from_json(None).matches(LABELS)  # null selects nothing
    # The query form of a structured selector selects the same pods.
    assert LabelSelector.parse(str(sel)).matches(LABELS)
    assert not LabelSelector.parse(str(sel)).matches({**LABELS, "canary": "1"})


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        ({"matchExpressions": [{"key": "a", "operator": "Bogus"}]}, "operator"),
        ({"matchExpressions": [{"key": "a", "operator": "In"}]}, "at least one value"),
        ({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}, "no values"),
        ({"matchLabels": ["a"]}, "map of strings"),
        ("app=web", "expected an object"),
    ],
)
def test_structured_selector_errors(raw: object, why: str) -> None:
    with pytest.raises(SelectorError, match=why):
        LabelSelector.from_json(raw, "spec.selector")


def test_field_selector() -> None:
    pod = {
        "metadata": {"name": "p"},
        "spec": {"nodeName": "n1", "hostNetwork": True},
        "status": {"phase": "Running"},
    }
    get = lambda f: field_value(pod, f)  # noqa: E731
    assert FieldSelector.parse("spec.nodeName=n1").matches(get)
    assert FieldSelector.parse("status.phase!=Succeeded,status.phase!=Failed").matches(get)
    assert not FieldSelector.parse("status.phase==Pending").matches(get)
    assert FieldSelector.parse("spec.schedulerName=").matches(get)  # missing is ""
    assert FieldSelector.parse("spec.hostNetwork=true").matches(get)
    assert FieldSelector.parse("spec.nodeName=n1,metadata.name=p").fields == {
        "spec.nodeName",
        "metadata.name",
    }
    with pytest.raises(SelectorError, match="'nodeName' is not of the form"):
        FieldSelector.parse("spec.nodeName=n1,nodeName")
