"""The target comes from the trunk: an experiment is judged by its parent's definition, workloads,
generator (inputs.py), compare rules and `.autogk.toml`, never by its own; one that changes anything but
its editable files is invalid (not kept, not held, archived, the files named), however it was committed."""
from __future__ import annotations

import json
import os
import subprocess

import pytest

from conftest import autogk_in, git, notes_json

T = "kernels/scale"
KERNEL = f"{T}/kernel.py"
ARCHIVE = "refs/autogk/archive/scale/0001"

# Wrong: skips the bias (out = x * scale), as a reduction-skipping kernel skips work.
SKIP_BIAS = ("x * scale + b, mask", "x * scale, mask")
# A generator that makes the wrong kernel exact: every bias zero.
ZERO_BIAS = '''import torch


def generate(axes, definition, seed, device):
    return {"bias": torch.zeros(axes["n"], dtype=torch.float32, device=device)}
'''
# An honest generator the trunk may already hold: draws the bias itself.
HONEST = '''import torch


def generate(axes, definition, seed, device):
    g = torch.Generator().manual_seed(seed)
    return {"bias": torch.randn(axes["n"], generator=g).to(device)}
'''


@pytest.fixture(autouse=True)
def no_tracking(monkeypatch):
    monkeypatch.setenv("AUTOGK_TRACKING_ENABLED", "0")  # the hooks' benchmarks too; MLflow is tested elsewhere


def edit(root, rel: str, old: str, new: str) -> None:
    p = root / rel
    text = p.read_text()
    assert old in text, f"{old!r} not in {rel}"
    p.write_text(text.replace(old, new, 1))


def commit_no_verify(root, subject: str) -> str:
    """`git add -A` and `git commit --no-verify`: the pre-commit guard skipped; post-commit benchmarks it."""
    git(root, "add", "-A")
    git(root, "commit", "-q", "--no-verify", "-m", subject)
    return git(root, "rev-parse", "HEAD").strip()


def conclude(project) -> str:
    return autogk_in(project, "iterate", "-n", "0", "--agent", "tune", "--max-time", "0.001").stdout


def rev(root, spec: str) -> str | None:
    out = subprocess.run(["git", "rev-parse", "--verify", "--quiet", spec], cwd=root, capture_output=True, text=True)
    return out.stdout.strip() or None


def assert_invalid(project, sha: str, trunk: str, files: list[str], out: str) -> dict:
    note = notes_json(project, sha)
    v = note["verdict"]
    assert v["decision"] == "invalid", v
    assert note["offending_files"] == files
    for f in files:
        assert f in v["reason"]
    assert not note["stages"], "an invalid experiment is not benchmarked"
    assert rev(project, "main") == trunk, "nothing merged"
    assert rev(project, ARCHIVE) == sha
    assert rev(project, "refs/autogk/kept/scale/0001") is None
    assert rev(project, "refs/autogk/untimed/scale/0001") is None
    assert "#0001 reverted: archived" in out, out
    return note


@pytest.mark.parametrize("trunk_has_generator", [False, True], ids=["adds-inputs.py", "changes-inputs.py"])
def test_a_smuggled_generator_committed_with_no_verify_is_invalid(project, trunk_has_generator):
    if trunk_has_generator:
        (project / T / "inputs.py").write_text(HONEST)
        git(project, "add", "-A")
        git(project, "commit", "-qm", "scale: the bias from a generator")
    trunk = rev(project, "main")
    git(project, "checkout", "-qb", "autogk/scale/0001-skip-the-bias")
    edit(project, KERNEL, *SKIP_BIAS)
    (project / T / "inputs.py").write_text(ZERO_BIAS)
    sha = commit_no_verify(project, "skip the bias")
    out = conclude(project)
    assert_invalid(project, sha, trunk, [f"{T}/inputs.py"], out)
    assert (project / T / "inputs.py").exists() == trunk_has_generator
    if trunk_has_generator:
        assert (project / T / "inputs.py").read_text() == HONEST


def test_a_smuggled_generator_from_a_linked_worktree_is_invalid(project, tmp_path):
    trunk = rev(project, "main")
    wt = tmp_path / "elsewhere"
    git(project, "worktree", "add", "-q", "-b", "autogk/scale/0001-skip-the-bias", str(wt), "main")
    edit(wt, KERNEL, *SKIP_BIAS)
    (wt / T / "inputs.py").write_text(ZERO_BIAS)
    sha = commit_no_verify(wt, "skip the bias")  # the hook runs in the linked worktree, from its files
    out = conclude(project)
    assert_invalid(project, sha, trunk, [f"{T}/inputs.py"], out)


def test_a_generator_left_uncommitted_in_the_checkout_does_not_judge(project):
    """The hook benchmarks in the experiment's own checkout: its working files are not the target."""
    trunk = rev(project, "main")
    git(project, "checkout", "-qb", "autogk/scale/0001-skip-the-bias")
    edit(project, KERNEL, *SKIP_BIAS)
    (project / T / "inputs.py").write_text(ZERO_BIAS)  # never committed
    git(project, "commit", "-qm", "skip the bias", "--", KERNEL)
    sha = rev(project, "HEAD")
    out = conclude(project)
    v = notes_json(project, sha)["verdict"]
    assert v["decision"] == "revert" and v["outcome"] == "incorrect", v
    assert "INCORRECT_NUMERICAL" in v["reason"]
    assert rev(project, "main") == trunk and "#0001 reverted" in out


def test_an_experiment_branched_from_a_side_commit_is_invalid(project):
    """A side branch (no guard there) changes inputs.py; the experiment changes the kernel alone on top:
    its parent is not on the trunk, so the target it would be judged by is not the trunk's."""
    trunk = rev(project, "main")
    git(project, "checkout", "-qb", "side")
    (project / T / "inputs.py").write_text(ZERO_BIAS)
    git(project, "add", "-A")
    git(project, "commit", "-qm", "a generator")
    git(project, "checkout", "-qb", "autogk/scale/0001-skip-the-bias")
    edit(project, KERNEL, *SKIP_BIAS)
    git(project, "commit", "-qam", "skip the bias")  # the guard passes: only the kernel is staged
    sha = rev(project, "HEAD")
    out = conclude(project)
    note = notes_json(project, sha)
    assert note["verdict"]["decision"] == "invalid", note["verdict"]
    assert "not on the trunk" in note["verdict"]["reason"] and "main" in note["verdict"]["reason"]
    assert rev(project, "main") == trunk and rev(project, ARCHIVE) == sha and "#0001 reverted" in out


@pytest.mark.parametrize("trailer", ["old-trunk", "unknown"])
def test_a_parent_trailer_does_not_choose_the_commit_that_judges(project, trailer):
    """`Autogk-Parent:` in a hand-written message names an older trunk commit, whose lax generator made
    the wrong kernel exact (the trunk has fixed it since): the experiment's own parent commit judges, and
    a trailer that names another commit makes the experiment invalid. The same kernel without the trailer
    is reverted as incorrect (test_a_wrong_kernel_only_experiment_is_still_reverted)."""
    (project / T / "inputs.py").write_text(ZERO_BIAS)
    git(project, "add", "-A")
    git(project, "commit", "-qm", "scale: a generator (every bias zero)")
    lax = rev(project, "main")
    (project / T / "inputs.py").write_text(HONEST)
    git(project, "commit", "-qam", "scale: the generator draws the bias")
    trunk = rev(project, "main")
    git(project, "checkout", "-qb", "autogk/scale/0001-skip-the-bias")
    edit(project, KERNEL, *SKIP_BIAS)
    named = lax if trailer == "old-trunk" else "0123456789abcdef0123456789abcdef01234567"
    git(project, "commit", "-qam", "skip the bias", "-m", f"Autogk-Parent: {named}")  # the guard passes
    sha = rev(project, "HEAD")
    out = conclude(project)
    note = notes_json(project, sha)
    v = note["verdict"]
    assert v["decision"] == "invalid", v["reason"]
    assert named[:10] in v["reason"] and trunk[:10] in v["reason"] and "Autogk-Parent" in v["reason"], v
    assert note["parent"] == trunk and not note["stages"]
    assert rev(project, "main") == trunk and rev(project, ARCHIVE) == sha and "#0001 reverted" in out
    assert rev(project, "refs/autogk/untimed/scale/0001") is None and rev(project, "refs/autogk/kept/scale/0001") is None


JUDGE_EDITS = {
    "definition.json": (f"{T}/definition.json", '"description": "', '"description": "changed: '),
    "workloads.jsonl": (f"{T}/workloads.jsonl", '"value": 1.5', '"value": 2.5'),
    ".autogk.toml": (".autogk.toml", "[bench]\n", "[bench]\nmin_effect = 0.5\n"),
}


@pytest.mark.parametrize("what", list(JUDGE_EDITS))
def test_an_experiment_that_edits_the_target_or_config_is_invalid(project, what):
    rel, old, new = JUDGE_EDITS[what]
    trunk = rev(project, "main")
    git(project, "checkout", "-qb", "autogk/scale/0001-smaller-block")
    edit(project, KERNEL, "BLOCK = 64", "BLOCK = 32")  # a correct kernel: kept, were it not for the rest
    edit(project, rel, old, new)
    sha = commit_no_verify(project, "smaller block")
    out = conclude(project)
    assert_invalid(project, sha, trunk, [rel], out)


def test_widening_the_editable_globs_in_the_experiment_does_not_widen_them(project):
    """The editable globs come from the parent's config; judge files are never editable anyway."""
    git(project, "checkout", "-qb", "autogk/scale/0001-skip-the-bias")
    edit(project, KERNEL, *SKIP_BIAS)
    (project / T / "inputs.py").write_text(ZERO_BIAS)
    cfg = project / ".autogk.toml"
    cfg.write_text(cfg.read_text().replace("[agent]\n", '[agent]\neditable = ["*"]\n', 1))
    sha = commit_no_verify(project, "skip the bias")
    conclude(project)
    note = notes_json(project, sha)
    assert note["verdict"]["decision"] == "invalid"
    assert note["offending_files"] == [".autogk.toml", f"{T}/inputs.py"]


def test_a_trunk_whose_globs_reach_inputs_py_still_guards_it(project):
    cfg = project / ".autogk.toml"
    cfg.write_text(cfg.read_text().replace("[agent]\n", '[agent]\neditable = ["*.py"]\n', 1))
    git(project, "commit", "-qam", "agents may edit every python file")
    trunk = rev(project, "main")
    git(project, "checkout", "-qb", "autogk/scale/0001-skip-the-bias")
    edit(project, KERNEL, *SKIP_BIAS)
    (project / T / "inputs.py").write_text(ZERO_BIAS)
    sha = commit_no_verify(project, "skip the bias")
    out = conclude(project)
    assert_invalid(project, sha, trunk, [f"{T}/inputs.py"], out)


def test_the_conclusion_checks_the_files_again(project):
    """A result note that says keep (written before this rule, or by hand) does not merge a commit that
    changes the generator: the conclusion archives it as invalid."""
    trunk = rev(project, "main")
    git(project, "checkout", "-qb", "autogk/scale/0001-skip-the-bias")
    edit(project, KERNEL, *SKIP_BIAS)
    (project / T / "inputs.py").write_text(ZERO_BIAS)
    git(project, "add", "-A")
    subprocess.run(["git", "commit", "-q", "--no-verify", "-m", "skip the bias"], cwd=project, check=True,
                   env={**os.environ, "AUTOGK_LOOP": "1"})  # the hook stays out: the note is written below
    sha = rev(project, "HEAD")
    keep = {"schema": 1, "target": "scale", "experiment": 1, "commit": sha, "parent": trunk,
            "branch": "autogk/scale/0001-skip-the-bias", "hypothesis": "skip the bias", "stages": {},
            "verdict": {"decision": "keep", "rule": "paired-ratio", "reason": "faster", "figures": ""}}
    git(project, "notes", "--ref", "autogk/results", "add", "-m", json.dumps(keep), sha)
    out = conclude(project)
    note = notes_json(project, sha)
    assert note["verdict"]["decision"] == "invalid" and note["offending_files"] == [f"{T}/inputs.py"]
    assert rev(project, "main") == trunk and rev(project, ARCHIVE) == sha
    assert rev(project, "refs/autogk/kept/scale/0001") is None and "#0001 reverted: archived" in out


def test_a_kernel_only_experiment_is_judged_as_before(project):
    git(project, "checkout", "-qb", "autogk/scale/0001-smaller-block")
    edit(project, KERNEL, "BLOCK = 64", "BLOCK = 32")
    sha = commit_no_verify(project, "smaller block")
    out = conclude(project)
    note = notes_json(project, sha)
    assert note["verdict"]["decision"] == "keep" and "offending_files" not in note
    assert note["stages"]["quick"]["summary"]["candidate"]["correct"]
    assert "#0001 kept: merged into main" in out
    assert rev(project, "refs/autogk/kept/scale/0001") == sha


def test_a_wrong_kernel_only_experiment_is_still_reverted(project):
    git(project, "checkout", "-qb", "autogk/scale/0001-skip-the-bias")
    edit(project, KERNEL, *SKIP_BIAS)
    sha = commit_no_verify(project, "skip the bias")
    out = conclude(project)
    v = notes_json(project, sha)["verdict"]
    assert v["decision"] == "revert" and v["outcome"] == "incorrect", v
    assert "#0001 reverted" in out
