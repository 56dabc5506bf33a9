"""The suite's own order (conftest.pytest_collection_modifyitems): slow tests lead the xdist slices, and the
tests that take the SLURM lock in turn run together on one worker, at the head of its slice."""
from __future__ import annotations

from types import SimpleNamespace

import conftest


class Item:
    def __init__(self, name: str, slow: float | None = None, locked: bool = False):
        self.name, self._slow = name, slow
        self.fixturenames = ["tmp_path"] + ([conftest.LOCKED_FIXTURE] if locked else [])

    def get_closest_marker(self, name: str):
        return SimpleNamespace(args=(self._slow,)) if name == "slow" and self._slow is not None else None

    def __repr__(self) -> str:
        return self.name


def order(items: list[Item], k: int) -> list[list[str]]:
    """The slices worksteal cuts from the order the hook leaves, as names."""
    config = SimpleNamespace(workerinput={"workercount": k})
    conftest.pytest_collection_modifyitems(config, items)
    out, left, at = [], len(items), 0
    for j in range(k):
        size = left // (k - j)
        left -= size
        out.append([it.name for it in items[at:at + size]])
        at += size
    return out


def test_the_locked_tests_lead_one_slice_together_and_the_slow_lead_the_others():
    items = ([Item(f"plain{i}") for i in range(30)] + [Item("slurm_limit", 91, True)]
             + [Item(f"slurm{i}", locked=True) for i in range(9)] + [Item("kills", 60), Item("readme", 41),
                                                                      Item("idx", 21), Item("sa", 17)])
    slices = order(items, 3)
    [mine] = [s for s in slices if "slurm_limit" in s]
    assert mine[:10] == ["slurm_limit"] + [f"slurm{i}" for i in range(9)], mine  # together, at the head
    others = [s for s in slices if s is not mine]
    assert {s[0] for s in others} == {"kills", "readme"}, slices  # 136 s of the lock's unit against 60 + 41
    assert sorted(n for s in slices for n in s) == sorted(it.name for it in items)


def test_a_locked_test_taken_out_of_the_unit_would_be_seen():
    # The unit's tests are known by the lock's fixture: a test that no longer takes it is spread as any other.
    items = [Item(f"plain{i}") for i in range(20)] + [Item("slurm_limit", 91, True), Item("kills", 60),
                                                       Item("slurm_a", locked=True), Item("slurm_b")]
    slices = order(items, 2)
    [mine] = [s for s in slices if "slurm_limit" in s]
    assert mine[:2] == ["slurm_limit", "slurm_a"], mine
    assert slices[-1][-1] == "slurm_b", slices  # in its place among the plain tests: the last
