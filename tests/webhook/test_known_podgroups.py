"""What the PodGroup reconciler remembers: made per owner uid, seen for a TTL, parked
until a hint, made-unowned until a pod joins; each bounded, oldest out first."""

from __future__ import annotations

from webhook.podgroup_intent import OwnerRef, PodGroupIntent
from webhook.podgroups.known import KnownPodGroups

API = "scheduling.volcano.sh/v1beta1"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def key(name: str) -> tuple[str, str, str, str]:
    return (API, "team", name, "podgroups")


def intent(name: str) -> PodGroupIntent:
    return PodGroupIntent(API, "podgroups", "team", name, {}, OwnerRef("batch/v1", "Job", name))


def known(clock: Clock | None = None, *, remember: int = 10, parked: int = 10) -> KnownPodGroups:
    return KnownPodGroups(remember=remember, parked=parked, ttl=30.0, clock=clock or Clock())


def test_made_is_per_owner_uid_so_a_new_workload_of_the_same_name_gets_its_own() -> None:
    k = known()
    k.mark_made(key("train"), "uid-1")
    assert k.made(key("train"), "uid-1")
    assert not k.made(key("train"), "uid-2")
    assert not k.made(key("train"), "")


def test_forget_drops_made_and_seen_so_a_resume_makes_it_again() -> None:
    k = known()
    k.mark_made(key("train"), "uid-1")
    k.saw(key("train"))
    k.forget(key("train"), "uid-1")
    assert not k.made(key("train"), "uid-1")
    assert not k.exists(key("train"))


def test_seen_lasts_the_ttl_and_no_longer() -> None:
    clock = Clock()
    k = known(clock)
    k.saw(key("a"))
    clock.now += 29.9
    assert k.exists(key("a"))
    clock.now += 0.2
    assert not k.exists(key("a"))
    k.saw(key("a"))  # seen again: counts from now
    assert k.exists(key("a"))
    k.gone(key("a"))
    assert not k.exists(key("a"))


def test_each_memory_is_bounded_and_seen_and_parked_keep_the_most_recently_touched() -> None:
    k = known(remember=2, parked=2)
    for name in ("a", "b", "c"):
        k.mark_made(key(name), "u")
    assert [k.made(key(n), "u") for n in "abc"] == [False, True, True]

    k.saw(key("a"))
    k.saw(key("b"))
    k.saw(key("a"))  # touched again: b is now the oldest
    k.saw(key("c"))
    assert [k.exists(key(n)) for n in "abc"] == [True, False, True]

    for name in ("a", "b", "c"):
        k.park(intent(name))
    assert k.parked == 2
    assert k.parked_for(key("a")) is None
    parked_b = k.parked_for(key("b"))
    assert parked_b is not None and parked_b.name == "b"
    k.unpark(key("b"))
    assert k.parked_for(key("b")) is None and k.parked == 1


def test_a_podgroup_made_without_owners_is_taken_for_removal_once() -> None:
    k = known()
    assert not k.take_unowned(key("g"))
    k.mark_unowned(key("g"))
    assert k.take_unowned(key("g"))
    assert not k.take_unowned(key("g"))


def test_one_joined_by_a_pod_is_not_taken_for_removal() -> None:
    k = known()
    k.mark_unowned(key("g"))
    k.owned_now(key("g"))
    assert not k.take_unowned(key("g"))
