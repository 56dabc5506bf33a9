"""Sharing through a hub: the README's "Share a run" commands, run word for word against a bare hub;
a clone of a hub without notes says so; notes of commits that are gone are skipped, counted, pruned."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, autogk_in, git
from review_support import copy_project, iterate_report, iterated_template

from autogk_git.record.notes import format_result, parse_result


@pytest.fixture
def iterated(template_project, tmp_path_factory, tmp_path):
    return copy_project(iterated_template(template_project, tmp_path_factory), tmp_path / "proj")


def readme_blocks(title: str) -> list[list[str]]:
    """The bash blocks of one README section, as command lines (comments kept: bash ignores them)."""
    text = (REPO / "README.md").read_text()
    section = text.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]
    return [[ln for ln in b.splitlines() if ln.strip()] for b in re.findall(r"```bash\n(.*?)```", section, re.S)]


def sh(cwd: Path, line: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(["bash", "-ec", line], cwd=cwd, capture_output=True, text=True)
    assert proc.returncode == 0, f"{line}\n{proc.stdout}\n{proc.stderr}"
    return proc


@pytest.mark.parametrize("default_branch, branch", [("main", "main"), ("master", "main"), ("master", "master")])
def test_the_readme_share_section_word_for_word(iterated, tmp_path, default_branch, branch):
    """Whatever git's default branch (`init.defaultBranch`) and whatever the project's branch is called:
    a hub made where git's default is `master` must not point at a branch nobody pushed."""
    git(tmp_path, "config", "--global", "init.defaultBranch", default_branch)
    if branch != "main":
        git(iterated, "branch", "-m", "main", branch)
    exps = {e["number"]: e["decision"] for e in iterate_report(iterated)["experiments"]}
    publish, clone = readme_blocks("Share a run")
    hub = tmp_path / "hub.git"
    for line in publish:
        sh(iterated, line)
        if line.startswith("git push hub"):
            # A plain push sends the branch and nothing of autogk's: what git does is not changed.
            hub_refs = git(hub, "for-each-ref", "--format=%(refname)").split()
            assert f"refs/heads/{branch}" in hub_refs and not [r for r in hub_refs if "autogk" in r], hub_refs
    hub_refs = git(hub, "for-each-ref", "--format=%(refname)").split()
    assert "refs/notes/autogk/results" in hub_refs and "refs/notes/autogk/plans" in hub_refs
    assert sum(r.startswith("refs/autogk/") for r in hub_refs) == len(exps)
    assert subprocess.run(["git", "config", "--get-all", "remote.hub.push"], cwd=iterated).returncode == 1

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = sh(elsewhere, "\n".join(clone))
    copy = elsewhere / "run-copy"
    assert git(copy, "branch", "--show-current").strip() == branch  # the clone checked the pushed branch out
    rows = json.loads(autogk_in(copy, "log", "--json").stdout)
    assert {r["number"]: r["decision"] for r in rows} == exps
    for n in exps:
        assert f"{n:04d}" in out.stdout or f"#{n}" in out.stdout  # the README's `autogk log` printed them
    assert "no autogk notes" not in out.stdout
    # Nothing configures what a plain `git push` sends, in the clone either.
    assert subprocess.run(["git", "config", "--get-all", "remote.origin.push"], cwd=copy).returncode == 1


def test_a_clone_of_a_hub_without_notes_says_so_and_how_to_fix_it(iterated, tmp_path):
    hub = tmp_path / "hub.git"
    git(tmp_path, "init", "-q", "--bare", str(hub))
    git(iterated, "remote", "add", "hub", str(hub))
    git(iterated, "push", "-q", "hub", "main")
    git(tmp_path, "clone", "-q", str(hub), str(tmp_path / "c"))
    log = autogk_in(tmp_path / "c", "log").stdout
    assert "`autogk sync` fetches the experiments from origin" in log
    out = autogk_in(tmp_path / "c", "sync", env={"AUTOGK_TRACKING_ENABLED": "false"})
    assert "origin holds no autogk notes" in out.stdout
    assert "autogk sync --push --remote origin" in out.stdout


def test_an_older_push_setting_is_removed(iterated, tmp_path):
    hub = tmp_path / "hub.git"
    git(tmp_path, "init", "-q", "--bare", str(hub))
    git(iterated, "remote", "add", "hub", str(hub))
    for spec in ("HEAD", "refs/notes/autogk/*:refs/notes/autogk/*", "refs/autogk/*:refs/autogk/*"):
        git(iterated, "config", "--add", "remote.hub.push", spec)
    out = autogk_in(iterated, "sync", "--remote", "hub", env={"AUTOGK_TRACKING_ENABLED": "false"})
    assert "removed the push settings" in out.stdout
    assert subprocess.run(["git", "config", "--get-all", "remote.hub.push"], cwd=iterated).returncode == 1


def test_sync_skips_counts_and_prunes_notes_whose_commit_is_gone(iterated, tmp_path):
    exps = iterate_report(iterated)["experiments"]
    # An experiment commit amended away: git copies its note to the new commit and keeps the old
    # commit's note, but nothing reaches the old commit, so a clone never gets it.
    first = exps[0]["commit"]
    note = git(iterated, "notes", "--ref", "autogk/results", "show", first)
    git(iterated, "checkout", "-q", "-b", "scratch", "main")
    (iterated / "scratch.txt").write_text("x\n")
    git(iterated, "add", "scratch.txt")
    git(iterated, "commit", "-qm", "a commit that will vanish")
    gone = git(iterated, "rev-parse", "HEAD").strip()
    git(iterated, "notes", "--ref", "autogk/results", "add", "-m", note.replace(first, gone), gone)
    git(iterated, "checkout", "-q", "main")
    git(iterated, "branch", "-qD", "scratch")
    hub = tmp_path / "hub.git"
    git(tmp_path, "init", "-q", "--bare", str(hub))
    git(iterated, "remote", "add", "hub", str(hub))
    git(iterated, "push", "-q", "hub", "main")
    autogk_in(iterated, "sync", "--push", "--remote", "hub", env={"AUTOGK_TRACKING_ENABLED": "false"})

    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(hub), str(clone))
    out = autogk_in(clone, "sync", "--json")  # with MLflow: the orphan is not logged and nothing crashes
    res = json.loads(out.stdout)
    assert res["orphaned"] == 1 and res["logged"] == len(exps), res
    assert "autogk sync --prune" in out.stderr
    again = json.loads(autogk_in(clone, "sync", "--full", "--json").stdout)
    assert again["orphaned"] == 1 and again["logged"] == len(exps)
    pruned = json.loads(autogk_in(clone, "sync", "--prune", "--json").stdout)
    assert pruned["pruned"] == 1 and pruned["orphaned"] == 1
    assert gone not in git(clone, "notes", "--ref", "autogk/results", "list")
    assert "orphaned" not in json.loads(autogk_in(clone, "sync", "--json").stdout)


def test_remote_add_then_git_push_and_the_notes_push_share_every_experiment(iterated, tmp_path):
    exps = {e["number"]: e["decision"] for e in iterate_report(iterated)["experiments"]}
    hub = tmp_path / "hub.git"
    git(tmp_path, "init", "-q", "--bare", str(hub))
    out = json.loads(autogk_in(iterated, "remote", "add", "hub", str(hub), "--json").stdout)
    assert out["added"] and out["url"] == str(hub), out
    fetch = git(iterated, "config", "--get-all", "remote.hub.fetch").split()
    assert fetch == ["+refs/heads/*:refs/remotes/hub/*", *out["fetch"]], fetch
    # What a plain push sends is git's own: no push setting, and the branch alone goes up.
    assert subprocess.run(["git", "config", "--get-all", "remote.hub.push"], cwd=iterated).returncode == 1
    git(iterated, "push", "-q", "hub", "main")
    assert not [r for r in git(hub, "for-each-ref", "--format=%(refname)").split() if "autogk" in r]
    sh(iterated, out["push_notes"])            # the documented push of the notes and experiment refs

    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(hub), str(clone))
    synced = json.loads(autogk_in(clone, "sync", "--json").stdout)
    assert synced["logged"] == len(exps) and synced["fetched_from"] == ["origin"], synced
    assert {r["number"]: r["decision"] for r in json.loads(autogk_in(clone, "log", "--json").stdout)} == exps
    # Shown, and marked as judged elsewhere: in `log`, `best` and the MLflow runs sync made of them.
    assert all(r["judged_here"] for r in json.loads(autogk_in(iterated, "log", "--json").stdout))
    assert not any(r["judged_here"] for r in json.loads(autogk_in(clone, "log", "--json").stdout))
    lines = autogk_in(clone, "log").stdout.splitlines()
    assert lines and all("(judged in another clone: its note was fetched)" in ln for ln in lines), lines
    assert "judged in another clone" not in autogk_in(iterated, "log").stdout
    first = min(exps)
    assert "judged in another clone: its result note was fetched" in autogk_in(clone, "show", str(first)).stdout
    assert "judged in another clone" not in autogk_in(iterated, "show", str(first)).stdout
    # `report` too: each fetched experiment's verdict cell, and the count in its summary line and figures.
    [made] = json.loads(autogk_in(clone, "report", "--no-mlflow", "--json").stdout)
    page = Path(made["html"]).read_text()
    assert page.count("(judged in another clone: its note was fetched)") == len(exps), page
    assert f"{len(exps)} of {len(exps)} judged in another clone" in page and made["summary"]["judged_elsewhere"] == len(exps)
    [own] = json.loads(autogk_in(iterated, "report", "--no-mlflow", "--json", "--out", str(tmp_path / "own")).stdout)
    assert "judged in another clone" not in Path(own["html"]).read_text() and own["summary"]["judged_elsewhere"] == 0
    from autogk_git.project import Project
    from autogk_git.tracking import mlflow_store
    client = mlflow_store._client(Project.find(clone))
    runs = [r for e in client.search_experiments() for r in client.search_runs([e.experiment_id])]
    assert len(runs) == len(exps) and {r.data.tags.get("autogk.judged_here") for r in runs} == {"false"}, runs
    # A remote the clone adds later: with `autogk remote add`, a plain `git fetch` brings the notes.
    text = autogk_in(clone, "remote", "add", "again", str(hub)).stdout
    assert "git fetch now carries autogk's notes" in text and "autogk sync --push --remote again" in text
    git(clone, "fetch", "-q", "again")
    assert git(clone, "rev-parse", "refs/notes/remotes/again/autogk/results").strip() == \
        git(hub, "rev-parse", "refs/notes/autogk/results").strip()


def test_remote_setup_of_an_existing_remote_and_its_errors(iterated, tmp_path):
    hub = tmp_path / "hub.git"
    git(tmp_path, "init", "-q", "--bare", str(hub))
    git(iterated, "remote", "add", "hub", str(hub))        # git's own: no refspecs of autogk's yet
    [out] = json.loads(autogk_in(iterated, "remote", "setup", "--json").stdout)
    assert out["remote"] == "hub" and not out["added"] and len(out["changes"]) == 1, out
    again = json.loads(autogk_in(iterated, "remote", "setup", "hub", "--json").stdout)
    assert again["changes"] == [], again                    # idempotent: nothing added twice
    assert git(iterated, "config", "--get-all", "remote.hub.fetch").split().count(out["fetch"][0]) == 1
    # The same URL again is a setup; another URL, an unknown remote, or no project: a clear error.
    assert not json.loads(autogk_in(iterated, "remote", "add", "hub", str(hub), "--json").stdout)["added"]
    for args, said, fix in [
        (("remote", "add", "hub", str(tmp_path / "other.git")), "a remote named hub exists already",
         "autogk remote setup hub"),
        (("remote", "setup", "nohub"), "there is no remote named nohub (this repository has: hub)",
         "autogk remote add nohub URL"),
    ]:
        bad = autogk_in(iterated, *args, check=False)
        assert bad.returncode == 1 and said in bad.stderr and "hint:" in bad.stderr and fix in bad.stderr, bad.stderr
        assert "Traceback" not in bad.stderr
    assert git(iterated, "remote").split() == ["hub"]
    elsewhere = tmp_path / "plain"
    elsewhere.mkdir()
    git(elsewhere, "init", "-q")
    bad = autogk_in(elsewhere, "remote", "add", "hub", str(hub), check=False)
    assert bad.returncode == 1 and "not inside an autogk project" in bad.stderr and "autogk init" in bad.stderr
    assert git(elsewhere, "remote").strip() == ""


def test_a_note_the_hub_changed_or_removed_does_not_replace_this_clones_own(iterated, tmp_path):
    """A collaborator fetches this clone's notes, rewrites one (a revert made a keep) and removes
    another, and pushes: that history descends from ours, so git's notes merge fast-forwarded to it and
    the hub's verdict replaced the one this clone's judge wrote. Each note held here stays as it was."""
    no_mlflow = {"AUTOGK_TRACKING_ENABLED": "false"}
    exps = iterate_report(iterated)["experiments"]
    hub = tmp_path / "hub.git"
    git(tmp_path, "init", "-q", "--bare", str(hub))
    autogk_in(iterated, "remote", "add", "hub", str(hub))
    git(iterated, "push", "-q", "hub", "main")
    autogk_in(iterated, "sync", "--push", "--remote", "hub", env=no_mlflow)
    ref = "autogk/results"
    mine = {c: git(iterated, "notes", "--ref", ref, "show", c) for c in (exps[0]["commit"], exps[1]["commit"])}

    peer = tmp_path / "peer"
    git(tmp_path, "clone", "-q", str(hub), str(peer))
    autogk_in(peer, "sync", env=no_mlflow)
    first, second = list(mine)
    forged = parse_result(mine[first], first)
    forged["verdict"]["decision"] = "keep" if forged["verdict"]["decision"] != "keep" else "revert"
    git(peer, "notes", "--ref", ref, "add", "-f", "-m", format_result(forged), first)
    git(peer, "notes", "--ref", ref, "remove", second)
    autogk_in(peer, "sync", "--push", "--remote", "origin", env=no_mlflow)
    assert parse_result(git(hub, "notes", "--ref", ref, "show", first), first)["verdict"] == forged["verdict"]

    out = autogk_in(iterated, "sync", "--remote", "hub", env=no_mlflow)
    for c, text in mine.items():
        assert git(iterated, "notes", "--ref", ref, "show", c) == text, out.stdout + out.stderr
    assert "kept the note this clone wrote on 2 commit(s)" in out.stdout + out.stderr
    assert {r["number"]: r["decision"] for r in json.loads(autogk_in(iterated, "log", "--json").stdout)} == \
        {e["number"]: e["decision"] for e in exps}


def test_two_processes_writing_notes_at_once_lose_none(tmp_path):
    """git updates a notes ref without a compare-and-swap: two writers at once (the loop and `sync`, or a
    hand commit's background benchmark) each built on the ref they had read, and the later one dropped the
    other's notes (48-62 of 80 kept in a red-team run). Every note autogk writes holds the notes lock."""
    root = tmp_path / "repo"
    git(tmp_path, "init", "-q", str(root))
    git(root, "commit", "-q", "--allow-empty", "-m", "root")
    for i in range(60):
        git(root, "commit", "-q", "--allow-empty", "-m", f"c{i}")
    shas = git(root, "rev-list", "HEAD").split()[:60]
    writer = ("import sys\nfrom pathlib import Path\nfrom autogk_git.git import repo\n"
              "for s in sys.argv[2].split(','):\n"
              "    repo.write_note(Path(sys.argv[1]), 'refs/notes/autogk/results', s, 'note for ' + s + '\\n')\n")
    procs = [subprocess.Popen([sys.executable, "-c", writer, str(root), ",".join(shas[k::2])]) for k in (0, 1)]
    assert [p.wait(timeout=300) for p in procs] == [0, 0]
    listed = git(root, "notes", "--ref", "autogk/results", "list").split()[1::2]
    assert sorted(listed) == sorted(shas), f"{len(listed)} of {len(shas)} notes kept"


def test_a_remote_cannot_move_this_clones_experiment_refs_or_take_an_open_number(iterated, tmp_path):
    """autogk fetches refs/autogk/* without `+`, but git still fast-forwards a ref: a collaborator who moved
    our kept #N onto a child commit of theirs and pushed made `log` and `show` describe their commit as our
    #N. And a new kept ref on a number this clone has an open branch for made the next iterate conclude the
    collaborator's commit as that experiment and delete the branch. `sync` now leaves both out, and says so."""
    no_mlflow = {"AUTOGK_TRACKING_ENABLED": "false"}
    hub = tmp_path / "hub.git"
    git(tmp_path, "init", "-q", "--bare", str(hub))
    autogk_in(iterated, "remote", "add", "hub", str(hub))
    git(iterated, "push", "-q", "hub", "main")
    autogk_in(iterated, "sync", "--push", "--remote", "hub", env=no_mlflow)
    [kept, *_] = git(iterated, "for-each-ref", "--format=%(refname)", "refs/autogk/kept/").split()
    ours = git(iterated, "rev-parse", kept).strip()
    git(iterated, "branch", "autogk/scale/0009-open", "main")  # an experiment this clone has open

    peer = tmp_path / "peer"
    git(tmp_path, "clone", "-q", str(hub), str(peer))
    autogk_in(peer, "sync", env=no_mlflow)
    child = git(peer, "commit-tree", f"{ours}^{{tree}}", "-p", ours, "-m", "theirs").strip()
    git(peer, "update-ref", kept, child)
    git(peer, "update-ref", "refs/autogk/kept/scale/0009", child)
    git(peer, "push", "-q", "origin", f"{kept}:{kept}", "refs/autogk/kept/scale/0009:refs/autogk/kept/scale/0009")

    out = autogk_in(iterated, "sync", "--remote", "hub", env=no_mlflow)
    text = out.stdout + out.stderr
    assert git(iterated, "rev-parse", kept).strip() == ours, text
    assert not git(iterated, "for-each-ref", "refs/autogk/kept/scale/0009"), text
    assert "left out 2 experiment ref(s)" in text, text


def test_a_plain_git_fetch_cannot_move_this_clones_experiment_refs(iterated, tmp_path):
    """`autogk sync` puts back an experiment ref a fetch moved, but a plain `git fetch` (or `git pull`)
    with the refspecs `autogk remote add` sets fast-forwarded this clone's kept #N onto a collaborator's
    child commit, and `log` then described their commit as ours. The reference-transaction hook refuses
    such a move unless autogk makes it; creations, deletions and git's own pack-refs and gc pass."""
    hub = tmp_path / "hub.git"
    git(tmp_path, "init", "-q", "--bare", str(hub))
    autogk_in(iterated, "remote", "add", "hub", str(hub))
    git(iterated, "push", "-q", "hub", "main")
    autogk_in(iterated, "sync", "--push", "--remote", "hub", env={"AUTOGK_TRACKING_ENABLED": "false"})
    [kept, *_] = git(iterated, "for-each-ref", "--format=%(refname)", "refs/autogk/kept/").split()
    ours = git(iterated, "rev-parse", kept).strip()
    peer = tmp_path / "peer"  # a plain clone, no autogk hooks: the collaborator moves our kept ref
    git(tmp_path, "clone", "-q", "--bare", str(hub), str(peer))
    child = git(peer, "commit-tree", f"{ours}^{{tree}}", "-p", ours, "-m", "theirs").strip()
    git(peer, "update-ref", kept, child)
    git(peer, "update-ref", "refs/autogk/kept/scale/0042", child)  # a new one: may come
    git(peer, "push", "-q", str(hub), f"{kept}:{kept}", "refs/autogk/kept/scale/0042:refs/autogk/kept/scale/0042")

    proc = subprocess.run(["git", "fetch", "hub"], cwd=iterated, capture_output=True, text=True)
    assert proc.returncode != 0, proc.stderr
    assert f"refused to move {kept}" in proc.stderr and "autogk sync" in proc.stderr, proc.stderr
    assert git(iterated, "rev-parse", kept).strip() == ours
    out = autogk_in(iterated, "sync", "--remote", "hub", env={"AUTOGK_TRACKING_ENABLED": "false"})
    assert git(iterated, "rev-parse", kept).strip() == ours, out.stdout + out.stderr
    assert git(iterated, "rev-parse", "refs/autogk/kept/scale/0042").strip() == child
    git(iterated, "pack-refs", "--all")
    git(iterated, "gc", "-q")
    assert git(iterated, "rev-parse", kept).strip() == ours
