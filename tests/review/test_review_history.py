"""Reading history in bulk: a fixed number of git processes whatever the count; the summary cache
never goes stale; best uses latencies when notes carry them."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, autogk_in, git

sys.path.insert(0, str(REPO / "benchmarks"))
import log_scale  # noqa: E402


def _git_calls(root: Path, *args: str, tmp: Path) -> int:
    return log_scale.count_git([str(Path(sys.executable).parent / "autogk"), *args], root, dict(os.environ), tmp)


@pytest.mark.parametrize("args", [("log",), ("best",), ("log", "--json", "--verdict", "keep")])
def test_git_processes_do_not_grow_with_the_history(tmp_path, args):
    small, large = tmp_path / "small", tmp_path / "large"
    log_scale.build(small, 20, 2, 2)
    log_scale.build(large, 300, 2, 2)
    counts = [_git_calls(r, *args, tmp=tmp_path) for r in (small, large, large)]  # cold, cold, warm
    assert counts[0] == counts[1] and counts[2] <= counts[1] and counts[1] <= 8
    rows = json.loads(autogk_in(large, "log", "--json").stdout)
    assert len(rows) == 300 and sum(r["decision"] == "keep" for r in rows) == 60
    assert all(r["timed"] and r["latency_us"] and r["ratio"] for r in rows)


def test_summary_cache_follows_rewritten_notes(tmp_path):
    root = tmp_path / "p"
    log_scale.build(root, 10, 2, 2)
    first = json.loads(autogk_in(root, "log", "--json").stdout)
    assert (root / ".git/autogk/history-cache.json").exists()
    sha = first[2]["commit"]
    text = git(root, "notes", "--ref", "autogk/results", "show", sha)
    git(root, "notes", "--ref", "autogk/results", "add", "-f", "-m",
        text.replace('"decision": "revert"', '"decision": "keep"').replace('"hypothesis": "tune: BLOCK -> 3"',
                                                                          '"hypothesis": "rewritten"'), sha)
    again = {r["number"]: r for r in json.loads(autogk_in(root, "log", "--json").stdout)}
    assert again[3]["hypothesis"] == "rewritten" and again[3]["decision"] == "keep"
    assert again[4] == first[3]


def test_best_picks_the_lowest_latency_when_notes_are_timed(tmp_path):
    root = tmp_path / "p"
    log_scale.build(root, 30, 3, 2)
    rows = [r for r in json.loads(autogk_in(root, "log", "--json", "--verdict", "keep").stdout)]
    best = json.loads(autogk_in(root, "best", "--json").stdout)[0]
    assert "lowest geometric-mean latency" in best["basis"]
    assert best["experiment"]["latency_us"] == pytest.approx(min(r["latency_us"] for r in rows))
    assert len(best["workloads_latency_us"]) == 3


def test_init_configures_the_remote_to_carry_notes_and_experiment_refs(tmp_path):
    from conftest import DATA
    root = tmp_path / "proj"
    git(tmp_path, "init", "-q", str(root))
    git(root, "remote", "add", "origin", str(tmp_path / "elsewhere.git"))
    autogk_in(root, "init", "--here", "--definition", str(DATA / "scale" / "definition.json"),
           "--workloads", str(DATA / "scale" / "workloads.jsonl"), "--no-check")
    fetch = git(root, "config", "--get-all", "remote.origin.fetch").split()
    assert "+refs/notes/autogk/*:refs/notes/remotes/origin/autogk/*" in fetch
    assert "refs/autogk/*:refs/autogk/*" in fetch and "+refs/heads/*:refs/remotes/origin/*" in fetch  # kept
    # A plain `git push` stays git's own: autogk sets no push refspec (`autogk sync --push` sends its refs).
    proc = subprocess.run(["git", "config", "--get-all", "remote.origin.push"], cwd=root, capture_output=True)
    assert proc.returncode == 1 and not proc.stdout


def test_report_on_a_timed_history_draws_latency_and_best_so_far(tmp_path):
    """Synthetic timed notes (benchmarks/log_scale.py): the latency view, kept marked, best-so-far."""
    root = tmp_path / "p"
    log_scale.build(root, 25, 3, 2)
    out = json.loads(autogk_in(root, "report", "--no-mlflow", "--out", str(tmp_path / "r"), "--json").stdout)[0]
    kept = json.loads(autogk_in(root, "log", "--verdict", "keep", "--json").stdout)
    assert out["summary"]["timed"] is True and out["summary"]["kept"] == len(kept) == 5
    assert out["summary"]["best_latency_us"] == pytest.approx(min(r["latency_us"] for r in kept))
    page = Path(out["html"]).read_text()
    assert "No latency was measured" not in page and page.count('<tr class="keep">') == 5
    assert Path(out["png"]).read_bytes()[:4] == b"\x89PNG"
