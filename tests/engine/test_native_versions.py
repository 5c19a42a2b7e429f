"""The one table of native gang API versions (``gangplace.engine.native_versions``):
whatever a cluster serves, corral uses a version it serves, the preferred one, and a
CompositePodGroup only where v1alpha3 serves it beside runtime PodGroups."""

from __future__ import annotations

from gangplace.engine.native_versions import NATIVE_VERSIONS, native_api, preferred_version
from hypothesis import given
from hypothesis import strategies as st

VERSIONS = st.frozensets(st.sampled_from([*NATIVE_VERSIONS, "v1", "v2alpha1"]))


def test_each_release_s_cluster() -> None:
    """1.35; 1.36; 1.37 with v1alpha3, v1beta1 or both."""
    one = frozenset({"v1alpha1"})
    api = native_api(one, frozenset())
    assert api is not None and (api.version, api.runtime_groups, api.composite) == (
        "v1alpha1",
        False,
        False,
    )
    two = frozenset({"v1alpha2"})
    api = native_api(two, two)
    assert api is not None and (api.version, api.runtime_groups, api.composite) == (
        "v1alpha2",
        True,
        False,
    )
    alpha3 = frozenset({"v1alpha3"})
    api = native_api(alpha3, alpha3, alpha3)
    assert api is not None and (api.api_version, api.composite_api_version) == (
        "scheduling.k8s.io/v1alpha3",
        "scheduling.k8s.io/v1alpha3",
    )
    beta = frozenset({"v1beta1"})
    api = native_api(beta, beta)
    assert api is not None and (api.version, api.composite) == ("v1beta1", False)
    both = alpha3 | beta
    api = native_api(both, both, alpha3)
    assert api is not None and (api.api_version, api.composite_api_version) == (
        "scheduling.k8s.io/v1beta1",
        "scheduling.k8s.io/v1alpha3",
    )
    assert native_api(frozenset(), frozenset()) is None


@given(VERSIONS, VERSIONS, VERSIONS)
def test_a_served_version_and_the_preferred_one(
    workloads: frozenset[str], podgroups: frozenset[str], composites: frozenset[str]
) -> None:
    api = native_api(workloads, podgroups, composites)
    usable = [v for v in NATIVE_VERSIONS if v in workloads and (v == "v1alpha1" or v in podgroups)]
    if not usable:
        assert api is None
        return
    assert api is not None and api.version == usable[0]
    assert api.runtime_groups is (api.version != "v1alpha1")
    assert api.composite is ("v1alpha3" in composites and api.version in ("v1alpha3", "v1beta1"))
    assert preferred_version(workloads) == next(v for v in NATIVE_VERSIONS if v in workloads)
