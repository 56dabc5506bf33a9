"""The experiment graph is a search tree: an experiment may branch from any node (`--from N`, `[search]
strategy`), is timed against the trunk whatever its start, and merges only when it beats the trunk, as
the exact kernel that was measured, with its path visible in `git log --graph` and `autogk log --tree`."""
from __future__ import annotations

import json
import os
import subprocess

import pytest

import timed_model
from timed_model import KERNEL, T, conclude, hand_experiment, rev, set_cost
from conftest import autogk_in, git, notes_json


# These tests are about the scheduler's pick: the tuner's own narrowing to near-misses (a node at most
# [search] near_miss slower than the trunk; tests/loop/test_search_tune.py) is opened wide here.
ANY_NODE = {"AUTOGK_SEARCH_NEAR_MISS": "10"}


@pytest.fixture(autouse=True)
def no_tracking(monkeypatch):
    monkeypatch.setenv("AUTOGK_TRACKING_ENABLED", "0")


@pytest.fixture
def timed(project, monkeypatch):
    return timed_model.timed_project(project, monkeypatch)


def test_a_child_of_a_slow_archived_node_is_timed_against_the_trunk_not_its_parent(timed):
    """A speed-rewarded proposer could plant a slow node, then 'speed it up' back to less than the trunk:
    2x faster than its parent, 2x slower than the trunk. Timed against the trunk, it is reverted."""
    trunk = rev(timed, "main")
    slow = hand_experiment(timed, 1, trunk, 40.0)
    conclude(timed)
    assert notes_json(timed, slow)["verdict"]["decision"] == "revert"
    assert rev(timed, "refs/autogk/archive/scale/0001") == slow
    child = hand_experiment(timed, 2, slow, 20.0)
    out = conclude(timed)
    note = notes_json(timed, child)
    assert note["parent"] == slow and note["against"] == trunk, (note["parent"], note.get("against"))
    v = note["verdict"]
    assert v["decision"] == "revert" and "slower than its parent by 100.0%" in v["reason"], v
    assert rev(timed, "main") == trunk, "nothing merged"
    assert "#0002 reverted" in out


def test_a_child_of_an_archived_node_that_beats_the_trunk_merges_as_the_kernel_measured(timed):
    trunk = rev(timed, "main")
    slow = hand_experiment(timed, 1, trunk, 40.0)
    conclude(timed)
    child = hand_experiment(timed, 2, slow, 8.0)
    out = conclude(timed)
    note = notes_json(timed, child)
    assert note["verdict"]["decision"] == "keep", note["verdict"]
    assert note["against"] == trunk and "faster than its parent by 20.0%" in note["verdict"]["reason"]
    merge = rev(timed, "main")
    assert merge != trunk and "#0002 kept" in out
    assert git(timed, "rev-parse", "main^1").strip() == trunk and git(timed, "rev-parse", "main^2").strip() == child
    assert git(timed, "show", f"main:{KERNEL}") == git(timed, "show", f"{child}:{KERNEL}")
    assert (timed / KERNEL).read_text() == git(timed, "show", f"{child}:{KERNEL}"), "the checkout follows"
    graph = git(timed, "log", "--graph", "--format=%s", "main")
    assert graph.index("cost 8.0") < graph.index("cost 40.0") < graph.index("scale: COST line"), graph
    tree = autogk_in(timed, "log", "--tree").stdout
    lines = tree.splitlines()
    one = next(i for i, ln in enumerate(lines) if "#0001" in ln)
    two = next(i for i, ln in enumerate(lines) if "#0002" in ln)
    indent = lambda s: len(s) - len(s.lstrip(" |`-"))  # noqa: E731
    assert two == one + 1 and indent(lines[two]) > indent(lines[one]), tree


def test_a_child_of_a_superseded_kept_node_is_timed_against_the_current_trunk(timed):
    """A kept node the trunk has moved past is stale: a child faster than it but slower than the trunk
    does not merge."""
    base = rev(timed, "main")
    k1 = hand_experiment(timed, 1, base, 8.0)
    conclude(timed)
    assert notes_json(timed, k1)["verdict"]["decision"] == "keep"
    k2 = hand_experiment(timed, 2, rev(timed, "main"), 5.0)
    conclude(timed)
    assert notes_json(timed, k2)["verdict"]["decision"] == "keep"
    tip = rev(timed, "main")
    child = hand_experiment(timed, 3, k1, 7.0)
    conclude(timed)
    note = notes_json(timed, child)
    assert note["against"] == tip and note["verdict"]["decision"] == "revert", note["verdict"]
    assert rev(timed, "main") == tip


def test_a_tree_keep_whose_trunk_moved_is_measured_again_against_the_new_tip(timed):
    from autogk_git.loop import experiment as ex
    from autogk_git.project import Project

    trunk = rev(timed, "main")
    slow = hand_experiment(timed, 1, trunk, 40.0)
    conclude(timed)
    child = hand_experiment(timed, 2, slow, 8.0)
    project = Project.find(timed)
    result = ex.assess(project, "scale", 2, child, "autogk/scale/0002-cost-8", lambda s: None)
    assert result["verdict"]["decision"] == "keep"
    ex.record(project, result, lambda s: None, track=False)  # measured, not concluded: then the trunk moves
    set_cost(timed, 6.0)
    git(timed, "commit", "-qam", "a person's faster trunk")
    tip = rev(timed, "main")
    out = conclude(timed)
    note = notes_json(timed, child)
    assert note["against"] == tip and note["verdict"]["decision"] == "revert", note["verdict"]
    assert note["remeasured"]["from_against"] == trunk
    assert "measuring it again against the new tip" in out and rev(timed, "main") == tip


def test_a_node_whose_path_changed_the_generator_hands_no_child_a_target(timed):
    """An archived node that changed inputs.py (invalid itself) cannot lend its target to a child that
    changes only the kernel: the child's whole path from the trunk is checked."""
    trunk = rev(timed, "main")
    git(timed, "checkout", "-q", "-b", "autogk/scale/0001-generator", trunk)
    (timed / T / "inputs.py").write_text("import torch\n\n\ndef generate(axes, definition, seed, device):\n"
                                         "    return {'bias': torch.zeros(axes['n'], device=device)}\n")
    git(timed, "add", "-A")
    subprocess.run(["git", "commit", "-qm", "zero bias"], cwd=timed, check=True,
                   env={**os.environ, "AUTOGK_LOOP": "1"})
    bad = rev(timed, "HEAD")
    git(timed, "checkout", "-q", "main")
    conclude(timed)
    assert notes_json(timed, bad)["verdict"]["decision"] == "invalid"
    child = hand_experiment(timed, 2, bad, 8.0)
    conclude(timed)
    note = notes_json(timed, child)
    assert note["verdict"]["decision"] == "invalid" and f"{T}/inputs.py" in note["offending_files"], note["verdict"]
    assert "not on the trunk" in note["verdict"]["reason"] and rev(timed, "main") == trunk


def test_iterate_from_a_held_node_branches_there_and_is_judged_against_the_trunk(project):
    """CPU, nothing timed: #1 is held; `iterate --from 1` branches #2 from it; merged on correctness
    (untimed = merge), the trunk takes #2's kernel and its path through #1."""
    text = (project / KERNEL).read_text().replace("MASK = True  # autogk: tune [True, False]", "MASK = True")
    (project / KERNEL).write_text(text)  # the tuner's only choice left is BLOCK: every proposal is correct
    git(project, "commit", "-qam", "scale: MASK fixed")
    trunk = rev(project, "main")
    out = json.loads(autogk_in(project, "iterate", "-n", "1", "--agent", "tune", "--json",
                               env={"AUTOGK_BENCH_UNTIMED": "hold"}).stdout)
    (one,) = out["experiments"]
    assert one["decision"] == "untimed"
    res = autogk_in(project, "iterate", "-n", "1", "--agent", "tune", "--from", "1", "--json")
    (two,) = json.loads(res.stdout)["experiments"]
    assert "from #0001 (held)" in res.stderr, res.stderr
    note = notes_json(project, two["commit"])
    assert note["parent"] == one["commit"] and note["against"] == trunk
    # The verdict's words say which kernel "its parent" was: the trunk, not the node it branched from.
    assert (f"its parent here is the trunk at {trunk[:10]}, which it was measured against (it branched from the "
            f"search node {one['commit'][:10]})") in note["verdict"]["reason"], note["verdict"]["reason"]
    assert "its parent here" not in notes_json(project, one["commit"])["verdict"]["reason"]
    assert two["decision"] == "keep"
    assert git(project, "rev-parse", "main^2").strip() == two["commit"]
    assert git(project, "rev-parse", f"{two['commit']}^").strip() == one["commit"]
    assert git(project, "show", f"main:{KERNEL}") == git(project, "show", f"{two['commit']}:{KERNEL}")
    bad = autogk_in(project, "iterate", "-n", "1", "--agent", "tune", "--from", "9", check=False)
    assert bad.returncode == 1 and "no experiment #0009" in bad.stderr and "autogk log --tree" in bad.stderr


def test_beam_branches_from_the_best_nodes(timed):
    """Two archived nodes (20 us, 30 us) beside the trunk (10 us, which has them as children): a beam of
    width 2 branches from the 20 us node (and then its equal child), never from the 30 us one; each is
    still timed against the trunk."""
    trunk = rev(timed, "main")
    n1 = hand_experiment(timed, 1, trunk, 20.0)
    n2 = hand_experiment(timed, 2, trunk, 30.0)
    conclude(timed)
    assert {notes_json(timed, s)["verdict"]["decision"] for s in (n1, n2)} == {"revert"}
    tip = rev(timed, "main")
    beam = {"AUTOGK_SEARCH_STRATEGY": "beam", "AUTOGK_SEARCH_WIDTH": "2", **ANY_NODE}
    out = json.loads(autogk_in(timed, "iterate", "-n", "2", "--agent", "tune", "--json", env=beam).stdout)
    parents = [notes_json(timed, e["commit"])["parent"] for e in out["experiments"] if e["commit"]]
    assert n1 in parents and n2 not in parents, (parents, n1, n2, tip)
    for e in out["experiments"]:
        if e["commit"]:
            assert notes_json(timed, e["commit"])["against"] == tip


def test_pick_spreads_a_beam_and_best_first_explores():
    from autogk_git.loop.search import Node, pick

    trunk = Node("t", None, "trunk", latency_us=10.0, children=3)
    good = Node("a", 1, "archived", latency_us=11.0, children=0)
    bad = Node("b", 2, "archived", latency_us=40.0, children=0)
    frontier = [trunk, good, bad]
    assert pick("trunk", 3, 0.5, frontier) is trunk
    assert pick("beam", 2, 0.5, frontier) is good  # fewest children among the best two
    assert pick("beam", 1, 0.5, frontier) is trunk
    assert pick("best", 3, 0.0, frontier) is trunk  # no exploration: the best node
    assert pick("best", 3, 2.0, frontier) is good   # exploration: an unvisited node close to the trunk


def test_a_branch_left_at_its_start_node_is_discarded_not_benchmarked_as_that_node(timed):
    """A loop killed after branching from an archived node, before the agent's commit, leaves a branch
    whose tip is the node itself: it is discarded, and the node's own note is left alone."""
    slow = hand_experiment(timed, 1, rev(timed, "main"), 40.0)
    conclude(timed)
    before = notes_json(timed, slow)
    git(timed, "branch", "autogk/scale/0002-wip", slow)
    out = conclude(timed)
    assert "#0002: stopped before its commit; discarding the empty branch" in out, out
    assert rev(timed, "refs/heads/autogk/scale/0002-wip") is None
    assert notes_json(timed, slow) == before


def test_parallel_workers_draw_from_the_beam_counting_what_is_in_flight(timed):
    """Beam of 2 over the trunk (one child) and an archived node (none): the first worker takes the node,
    the second, counting the first's experiment in flight, the trunk."""
    trunk = rev(timed, "main")
    node = hand_experiment(timed, 1, trunk, 20.0)
    conclude(timed)
    beam = {"AUTOGK_SEARCH_STRATEGY": "beam", "AUTOGK_SEARCH_WIDTH": "2", **ANY_NODE}
    out = json.loads(autogk_in(timed, "iterate", "-n", "2", "--parallel", "2", "--agent", "tune", "--json",
                               env=beam).stdout)
    firsts = sorted((e for e in out["experiments"] if e["commit"]), key=lambda e: e["number"])
    parents = [notes_json(timed, e["commit"])["parent"] for e in firsts]
    assert parents == [node, trunk], (parents, node, trunk)
