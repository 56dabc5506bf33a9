"""Hooks: chained with a user's own, guard experiment branches, benchmark hand-made experiments."""
from __future__ import annotations

import json
import os
import stat
import subprocess

import pytest

from conftest import autogk_in, git, notes_json


@pytest.fixture
def project(small_project):
    """Two workloads, both in the quick stage (conftest.small_project): these tests are not about workloads."""
    return small_project


def test_install_chains_an_existing_hook_and_uninstall_restores_it(project):
    hooks = project / ".git" / "hooks"
    autogk_in(project, "hooks", "uninstall")
    mine = hooks / "post-commit"
    mine.write_text("#!/bin/sh\necho user-hook-ran >> \"$(git rev-parse --git-dir)/user-hook.log\"\n")
    mine.chmod(mine.stat().st_mode | stat.S_IXUSR)
    out = autogk_in(project, "hooks", "install").stdout
    assert "now runs first" in out
    (project / "a.txt").write_text("a")
    git(project, "add", "a.txt")
    git(project, "commit", "-qm", "a")
    assert (project / ".git" / "user-hook.log").read_text() == "user-hook-ran\n"
    autogk_in(project, "hooks", "uninstall")
    assert mine.read_text().startswith("#!/bin/sh\necho user-hook-ran")
    assert not (hooks / "post-commit.autogk-chained").exists()


def test_pre_commit_refuses_files_outside_the_editable_ones(project):
    git(project, "checkout", "-qb", "autogk/scale/0001-by-hand")
    (project / "README.txt").write_text("not a kernel\n")
    git(project, "add", "README.txt")
    proc = subprocess.run(["git", "commit", "-m", "sneak"], cwd=project, capture_output=True, text=True)
    assert proc.returncode != 0
    assert "README.txt" in proc.stderr and "may change only kernels/scale/" in proc.stderr


def test_hand_made_experiment_is_benchmarked_by_the_hook_and_concluded_by_iterate(project):
    git(project, "checkout", "-qb", "autogk/scale/0001-smaller-block")
    k = project / "kernels" / "scale" / "kernel.py"
    k.write_text(k.read_text().replace("BLOCK = 64", "BLOCK = 32"))
    # As a person commits by default: the hook benchmarks in the background and returns at once.
    subprocess.run(["git", "commit", "-qam", "smaller block"], cwd=project, check=True,
                   env={**os.environ, "AUTOGK_BENCH_HOOK_MODE": "background"})
    sha = git(project, "rev-parse", "HEAD").strip()
    assert (project / ".git" / "autogk" / "bench" / f"{sha}.pid").exists()  # still benchmarking
    # iterate right away: it waits for that benchmark (not skipping it), concludes it and counts it.
    out = autogk_in(project, "iterate", "-n", "0", "--agent", "tune", "--max-time", "0.001").stdout
    assert "#0001: being benchmarked in the background" in out and "waiting for its result" in out
    assert "#0001 kept: merged into main" in out
    assert "done: 1 experiment(s) concluded (1 left open before this run), 1 kept, 0 reverted" in out
    note = notes_json(project, sha)
    assert note["experiment"] == 1 and note["agent"] == "human" and note["verdict"]["decision"] == "keep"
    assert git(project, "rev-parse", "--abbrev-ref", "HEAD").strip() == "main"
    assert "BLOCK = 32" in k.read_text()
    assert git(project, "rev-parse", "refs/autogk/kept/scale/0001").strip() == sha


def test_notes_follow_amend(project):
    git(project, "checkout", "-qb", "autogk/scale/0001-x")
    k = project / "kernels" / "scale" / "kernel.py"
    k.write_text(k.read_text().replace("BLOCK = 64", "BLOCK = 128"))
    # The first commit's result is written by hand (its benchmark is not the point; AUTOGK_LOOP keeps
    # the hook out, as for the loop's own commits): the amend must copy it, then measure anew.
    subprocess.run(["git", "commit", "-qam", "bigger block"], cwd=project, check=True,
                   env={**os.environ, "AUTOGK_LOOP": "1"})
    old = git(project, "rev-parse", "HEAD").strip()
    stale = {"schema": 1, "target": "scale", "experiment": 1, "commit": old, "verdict": {"decision": "keep"}}
    git(project, "notes", "--ref", "autogk/results", "add", "-m", json.dumps(stale), old)
    git(project, "notes", "--ref", "autogk/plans", "add", "-m", "the plan", old)
    git(project, "commit", "-q", "--amend", "-m", "bigger block, reworded")
    new = git(project, "rev-parse", "HEAD").strip()
    assert new != old
    assert git(project, "notes", "--ref", "autogk/plans", "show", new).strip() == "the plan"
    # Re-benchmarked by the hook after the amend: the result measured on the new commit is the one
    # read, whatever the stale copy beside it.
    fresh = notes_json(project, new)
    assert fresh["commit"] == new and fresh["stages"] and fresh["verdict"]["decision"] == "keep"


def test_a_folder_named_autogk_git_in_the_checkout_does_not_run_as_the_hook(project, tmp_path):
    # A red-team plant (2026-12-06): git runs hooks from the checkout's top folder, and `python -m` put that
    # folder first on sys.path, so an experiment that added autogk_git/hook.py ran its own code as both
    # hooks (no --no-verify needed: pre-commit already saw the working tree) and forged a keep.
    marker = tmp_path / "planted-hook-ran"
    git(project, "checkout", "-qb", "autogk/scale/0001-skip-bias")
    k = project / "kernels" / "scale" / "kernel.py"
    k.write_text(k.read_text().replace("BLOCK = 64", "BLOCK = 32"))
    fake = project / "autogk_git"
    fake.mkdir()
    (fake / "__init__.py").write_text("")
    (fake / "hook.py").write_text(f"open({str(marker)!r}, 'a').write('ran')\n")
    subprocess.run(["git", "commit", "-qam", "smaller block"], cwd=project, check=True,
                   env={**os.environ, "AUTOGK_BENCH_HOOK_MODE": "background"})
    assert not marker.exists()
    sha = git(project, "rev-parse", "HEAD").strip()
    assert (project / ".git" / "autogk" / "bench" / f"{sha}.pid").exists()  # autogk's own hook ran
    # The background benchmark starts in the same folder: autogk's, too.
    out = autogk_in(project, "iterate", "-n", "0", "--agent", "tune", "--max-time", "0.001").stdout
    assert "#0001 kept: merged into main" in out and not marker.exists()


def test_doctor_names_hook_shims_from_an_older_template(project):
    hook = project / ".git" / "hooks" / "post-commit"
    hook.write_text(hook.read_text().replace("-c '", "-X utf8 -c '"))  # any older text of ours
    out = json.loads(autogk_in(project, "doctor", "--json", check=False).stdout)
    assert out["project"]["hooks"]["post-commit"] == "outdated", out["project"]["hooks"]
    assert any("autogk hooks install" in w and "older autogk" in w for w in out["warnings"]), out["warnings"]
    out = autogk_in(project, "iterate", "-n", "0", "--agent", "tune", "--max-time", "0.001").stdout
    assert "updated this repository's hook shims" in out  # the loop rewrites them before it runs
    assert json.loads(autogk_in(project, "doctor", "--json", check=False).stdout)["project"]["hooks"] == \
        {"post-commit": "installed", "pre-commit": "installed",
         "reference-transaction": "installed"}


def test_a_hand_branch_on_a_number_already_used_is_refused_with_the_next_free_one(project):
    """The README's hand experiment names its own number. On a number the loop had concluded (archived),
    the hook judged the commit (a keep), then iterate took the branch for the loop's finished experiment and
    deleted it unmerged: the person's keep lived only as a note on an unreachable commit. On the number of
    another open branch, the two experiments were merged into one by `scan`."""
    autogk_in(project, "iterate", "-n", "2", "--agent", "tune")
    concluded = git(project, "for-each-ref", "--format=%(refname)", "refs/autogk/").split()
    number = int(concluded[0].rsplit("/", 1)[1])
    k = project / "kernels" / "scale" / "kernel.py"
    git(project, "checkout", "-qb", f"autogk/scale/{number:04d}-mine")
    k.write_text(k.read_text() + "# a change\n")
    proc = subprocess.run(["git", "commit", "-qam", "mine"], cwd=project, capture_output=True, text=True)
    assert proc.returncode != 0 and "already" in proc.stderr, proc.stderr
    assert "git branch -m autogk/scale/0003-mine" in proc.stderr, proc.stderr
    git(project, "branch", "-m", "autogk/scale/0003-mine")
    subprocess.run(["git", "commit", "-qam", "mine"], cwd=project, check=True)
    # another open branch on that number: refused too
    git(project, "checkout", "-q", "main")
    git(project, "checkout", "-qb", "autogk/scale/0003-other")
    k.write_text(k.read_text() + "# another change\n")
    proc = subprocess.run(["git", "commit", "-qam", "other"], cwd=project, capture_output=True, text=True)
    assert proc.returncode != 0 and "is open already on autogk/scale/0003-mine" in proc.stderr, proc.stderr


def test_a_project_from_before_the_ref_hook_gets_it_with_a_users_own_chained(project, tmp_path):
    """Projects made before the reference-transaction hook: the loop adds it before it runs, and a hook
    of that name the user had runs first with the same input. A hand-made move of an experiment ref is
    refused, and says how to make it on purpose."""
    hooks = project / ".git" / "hooks"
    (hooks / "reference-transaction").unlink()
    seen = tmp_path / "seen.txt"
    (hooks / "reference-transaction").write_text(f'#!/bin/sh\nwhile read -r o n r; do echo "$1 $r" >> {seen}; done\n')
    (hooks / "reference-transaction").chmod(0o755)
    out = autogk_in(project, "iterate", "-n", "0", "--agent", "tune", "--max-time", "0.001").stdout
    assert "added the reference-transaction hook" in out, out
    assert (hooks / "reference-transaction.autogk-chained").exists()
    git(project, "update-ref", "refs/heads/look", "HEAD")
    assert "prepared refs/heads/look" in seen.read_text()  # the user's hook still runs
    git(project, "update-ref", "refs/autogk/kept/scale/0001", "HEAD")  # a creation passes
    other = git(project, "commit-tree", "HEAD^{tree}", "-p", "HEAD", "-m", "other").strip()
    proc = subprocess.run(["git", "update-ref", "refs/autogk/kept/scale/0001", other], cwd=project,
                          capture_output=True, text=True)
    assert proc.returncode != 0 and "refused to move refs/autogk/kept/scale/0001" in proc.stderr, proc.stderr
    assert "AUTOGK_REF_WRITER=1" in proc.stderr
    subprocess.run(["git", "update-ref", "refs/autogk/kept/scale/0001", other], cwd=project, check=True,
                   env={**os.environ, "AUTOGK_REF_WRITER": "1"})
    git(project, "update-ref", "-d", "refs/autogk/kept/scale/0001")  # a deletion passes


@pytest.mark.parametrize("name", ["post-commit", "pre-commit"])
def test_the_loops_own_commits_start_no_python_in_the_hooks(project, tmp_path, name):
    # The hooks leave the loop's commits to it (env.in_loop): the shim says so in shell, so each of the
    # loop's commits costs no Python start-up (~0.1 CPU-s a commit, two hooks a commit).
    from autogk_git.git.hooks import shim_text
    ran = tmp_path / "python-ran"
    fake = tmp_path / "python"
    fake.write_text(f"#!/bin/sh\necho \"$@\" >> {ran}\n")
    fake.chmod(0o755)
    shim = tmp_path / "hooks" / name
    shim.parent.mkdir()
    shim.write_text(shim_text(name, str(fake)))
    shim.chmod(0o755)
    git(project, "checkout", "-qb", "autogk/scale/0001-by-hand")
    for loop in ("1", ""):
        subprocess.run([str(shim)], cwd=project, check=True, env={**os.environ, "AUTOGK_LOOP": loop})
        assert ran.exists() == (loop == ""), (loop, ran.exists())
    assert ran.read_text().split()[-2:] == ["autogk_git.hook", name]
