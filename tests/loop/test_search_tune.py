"""The offline tuner searches the tree: with `[search] strategy = beam` (or `best`) it continues a coordinate
search from a near-miss node, leaves nodes far slower than the trunk and dead ends (every single change
tried), and so finds an optimum two steps away through a first step that does not pay on its own, which the
trunk tuner (singles, then pairs, from the trunk tip) does not reach in the same number of experiments.

The landscape is the timing model's (tests/timed_model.py), over four tunables the kernel declares but does
not use (every configuration is correct, checked by the Triton interpreter): C and D only slow it down, A = 1
alone is a near-miss (+2 %), B = 1 alone is twice as slow, A = 1 with B = 1 is twice as fast.
"""
from __future__ import annotations

import json
import types

import pytest

import timed_model
from timed_model import KERNEL, rev
from conftest import autogk_in, git, notes_json

LANDSCAPE = '''\
C = 0  # autogk: tune [0, 1, 2, 3]
D = 0  # autogk: tune [0, 1, 2, 3]
A = 0  # autogk: tune [0, 1]
B = 0  # autogk: tune [0, 1]
COST = 5.0 + 3 * C + 3 * D if A == 1 and B == 1 else 10.0 + 3 * C + 3 * D + 0.2 * A + 10 * B
'''
# By the same rules worked by hand: the searching tuner needs 6 (3 from the trunk, 3 from the near-miss),
# the trunk tuner 16 (its 8 singles, then pairs in the order their singles predict).
BUDGET = 7
QUIET = {"AUTOGK_RESEARCH_PLATEAU": "0", "AUTOGK_RESEARCH_WALL": "0"}


@pytest.fixture(autouse=True)
def no_tracking(monkeypatch):
    monkeypatch.setenv("AUTOGK_TRACKING_ENABLED", "0")


@pytest.fixture
def landscape(project, monkeypatch):
    timed_model.install(monkeypatch)
    text = (project / KERNEL).read_text()
    text = text.replace("BLOCK = 64  # autogk: tune [32, 64, 128]", "BLOCK = 64")
    text = text.replace("MASK = True  # autogk: tune [True, False]", "MASK = True")
    i = text.index("BLOCK = 64")
    (project / KERNEL).write_text(text[:i] + LANDSCAPE + text[i:])
    git(project, "commit", "-qam", "scale: four tunables over a modelled landscape")
    return project


def _run(root, strategy: str) -> tuple[list[dict], str]:
    env = {**QUIET, "AUTOGK_SEARCH_STRATEGY": strategy}
    res = autogk_in(root, "iterate", "-n", str(BUDGET), "--agent", "tune", "--json", env=env)
    return json.loads(res.stdout)["experiments"], res.stderr


def _cfg(root, sha: str) -> dict:
    return notes_json(root, sha)["tunables"]


def test_the_searching_tuner_finds_an_optimum_behind_a_near_miss(landscape):
    """`best` takes the same path here (6 experiments); each experiment is ~20 s of interpreter, so one
    strategy runs end to end and the pick itself is checked below."""
    base = rev(landscape, "main")
    exps, err = _run(landscape, "beam")
    kept = [e for e in exps if e["decision"] == "keep"]
    assert kept, (err, [(e["number"], e["hypothesis"], e["decision"]) for e in exps])
    win = notes_json(landscape, kept[0]["commit"])
    assert win["tunables"] == {"C": 0, "D": 0, "A": 1, "B": 1}, win["tunables"]
    near = next(e for e in exps if e["commit"] and _cfg(landscape, e["commit"]) == {"C": 0, "D": 0, "A": 1, "B": 0})
    assert win["parent"] == near["commit"] and win["against"] == base, "continued from the near-miss, timed vs the trunk"
    assert "from #%04d (archived)" % near["number"] in err
    plan = git(landscape, "notes", "--ref", "autogk/plans", "show", kept[0]["commit"])
    assert "coordinate search continuing from a near-miss" in plan, plan
    # Never from a node far slower than the trunk (C or D raised: +30 %): their children would be as slow.
    for e in exps:
        if e["commit"]:
            parent = notes_json(landscape, e["commit"])["parent"]
            if parent not in (base, near["commit"], rev(landscape, "main")):
                pcfg = _cfg(landscape, parent)
                assert pcfg["C"] == 0 and pcfg["D"] == 0, (e, pcfg)
    assert "A = 1" in git(landscape, "show", f"main:{KERNEL}") and "B = 1" in git(landscape, "show", f"main:{KERNEL}")


def test_the_trunk_tuner_does_not_reach_it_in_the_same_budget(landscape):
    base = rev(landscape, "main")
    exps, err = _run(landscape, "trunk")
    assert len([e for e in exps if e["commit"]]) == BUDGET, err
    assert all(e["decision"] != "keep" for e in exps), exps
    assert rev(landscape, "main") == base
    for e in exps:
        assert notes_json(landscape, e["commit"])["parent"] == base  # a line: every one from the trunk tip
    assert {"C": 0, "D": 0, "A": 1, "B": 1} not in [_cfg(landscape, e["commit"]) for e in exps]


def test_dead_ends_and_far_nodes_are_left_and_the_trunk_is_the_fallback():
    """Unit level: the tuner's filter over search nodes, and the pick that honours it."""
    from autogk_git.agents.tune import TuneAgent
    from autogk_git.loop.search import Node, pick

    src = "A = 0  # autogk: tune [0, 1]\nB = 0  # autogk: tune [0, 1]\n"
    cfg = types.SimpleNamespace(search=types.SimpleNamespace(strategy="beam", near_miss=0.05))
    res = lambda c, p=None: {"tunables": c, "parent_tunables": p or {"A": 0, "B": 0}, "stages": {"ab": {}}}  # noqa: E731
    history = [res({"A": 1, "B": 0}), res({"A": 0, "B": 1})]
    live = TuneAgent().node_filter(cfg, src, history)
    trunk = Node("t", None, "trunk", latency_us=10.0, tunables={"A": 0, "B": 0}, children=2)
    near = Node("a", 1, "archived", latency_us=10.2, tunables={"A": 1, "B": 0})
    far = Node("b", 2, "archived", latency_us=20.0, tunables={"A": 0, "B": 1})
    assert not live(trunk, 10.0), "both single changes of the trunk were tried: a dead end"
    assert live(near, 10.0) and not live(far, 10.0)
    assert pick("beam", 3, 0.5, [trunk, near], trunk_open=False) is near
    assert pick("best", 3, 0.5, [trunk, near], trunk_open=False) is near
    assert pick("beam", 3, 0.5, [trunk], trunk_open=False) is trunk, "nothing else left: the trunk's pairs"
    history.append(res({"A": 1, "B": 1}))
    assert not TuneAgent().node_filter(cfg, src, history)(near, 10.0), "every neighbour tried: pruned"
    cfg.search.strategy = "trunk"
    assert TuneAgent().node_filter(cfg, src, history) is None, "the trunk strategy does not search"
