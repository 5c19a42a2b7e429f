"""The Go math/rand port draws exactly what Go 1.19/1.20 draws (values printed by Go)."""

from __future__ import annotations

import pytest
from gangplace.sim.go_rand import GoRand

# Per seed: Int(), Shuffle of 0..11, Intn(8152), Intn(1<<20), Intn(7), Perm(10),
# Int63n(1000000007), Uint64() -- in that order, from one rand.New(rand.NewSource(seed)).
GO = {
    42: (3440579354231278675, [4, 8, 7, 10, 1, 9, 5, 3, 11, 2, 6, 0], 1559, 309980, 5,
         [8, 0, 2, 3, 9, 4, 1, 5, 6, 7], 575429469, 8548114504158162025),
    51: (3893522058333705853, [2, 10, 1, 11, 5, 0, 7, 4, 9, 6, 3, 8], 2499, 781398, 5,
         [8, 1, 3, 7, 5, 2, 4, 0, 9, 6], 757245450, 256971917719268371),
    0: (8717895732742165505, [10, 6, 5, 9, 4, 8, 1, 11, 3, 0, 7, 2], 6995, 209564, 6,
        [0, 9, 7, 2, 4, 5, 8, 6, 3, 1], 734547154, 3706853784096366226),
    -7: (747107023976529931, [11, 10, 5, 1, 7, 3, 4, 6, 2, 0, 8, 9], 6165, 281868, 2,
         [2, 9, 1, 4, 6, 8, 0, 5, 7, 3], 396699653, 14562633145492395001),
    1 << 40: (5470237361722394362, [2, 3, 0, 4, 6, 11, 9, 5, 7, 10, 1, 8], 5236, 406490, 3,
              [3, 4, 2, 7, 9, 8, 1, 0, 5, 6], 989765620, 12752363286585113916),
}  # fmt: skip


@pytest.mark.parametrize("seed", sorted(GO))
def test_same_draws_as_go(seed: int) -> None:
    r = GoRand(seed)
    a = r.int_()
    xs = list(range(12))
    r.shuffled(xs)
    got = (
        a,
        xs,
        r.intn(8152),
        r.intn(1 << 20),
        r.intn(7),
        r.perm(10),
        r.int63n(1000000007),
        r.uint64(),
    )
    assert got == GO[seed]


def test_long_shuffle_and_perm_match_go() -> None:
    # rand.Seed(42); rand.Int(); rand.Shuffle(8152, ...); rand.Perm(1213)
    r = GoRand(42)
    r.int_()
    xs = list(range(8152))
    r.shuffled(xs)
    assert xs[:10] == [255, 1685, 6784, 4463, 602, 1564, 3882, 7257, 6545, 1541]
    assert xs[-5:] == [3122, 357, 1701, 4923, 538]
    assert r.perm(1213)[:10] == [496, 1123, 900, 308, 233, 1090, 553, 232, 920, 736]


def test_bad_arguments() -> None:
    r = GoRand(1)
    for fn in (r.intn, r.int31n, r.int63n):
        with pytest.raises(ValueError):
            fn(0)
