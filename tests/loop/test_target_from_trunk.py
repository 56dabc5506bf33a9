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


def _tree(root, entries: list[tuple[str, str, str]]) -> str:
    """A tree object written as given (git's checks skipped, as `hash-object --literally` allows): entries
    (mode, name, sha) in this order, names like `..` and repeated names included."""
    data = b"".join(f"{mode} {name}".encode() + b"\0" + bytes.fromhex(sha) for mode, name, sha in entries)
    return subprocess.run(["git", "hash-object", "-t", "tree", "--literally", "-w", "--stdin"], cwd=root,
                          input=data, capture_output=True, check=True).stdout.decode().strip()


def _entries(root, spec: str) -> list[tuple[str, str, str]]:
    out = git(root, "ls-tree", spec)
    return [(m.lstrip("0") if m.startswith("0") else m, name, sha)
            for m, _, rest in (line.split(" ", 2) for line in out.splitlines()) for sha, name in [rest.split("\t")]]


def _blob(root, text: str) -> str:
    return subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=root, input=text.encode(),
                          capture_output=True, check=True).stdout.decode().strip()


def _commit_scale_tree(project, scale: list[tuple[str, str, str]], subject: str) -> str:
    """An experiment commit on main whose kernels/scale tree is `scale`, made with plumbing (no hook, no
    checkout could hold it), on its experiment branch."""
    kernels = [(m, n, _tree(project, scale) if n == "scale" else s) for m, n, s in _entries(project, "main:kernels")]
    top = [(m, n, _tree(project, kernels) if n == "kernels" else s) for m, n, s in _entries(project, "main")]
    sha = git(project, "commit-tree", _tree(project, top), "-p", "main", "-m", subject).strip()
    git(project, "update-ref", "refs/heads/autogk/scale/0001-" + subject.replace(" ", "-"), sha)
    return sha


def test_a_path_through_dotdot_is_no_editable_file_and_writes_nothing(project):
    # A red-team plant (2026-12-06): with `editable = ["*.py"]` on the trunk, fnmatch's `*` took
    # kernels/scale/x/../inputs.py for an editable file; the experiment was kept, and the trunk's snapshot
    # then wrote it over the honest inputs.py, so a later wrong kernel was kept.
    cfg = project / ".autogk.toml"
    cfg.write_text(cfg.read_text().replace("[agent]\n", '[agent]\neditable = ["*.py"]\n', 1))
    git(project, "commit", "-qam", "agents may edit every python file")
    trunk = rev(project, "main")
    kernel = (project / KERNEL).read_text().replace("BLOCK = 64", "BLOCK = 32")
    up = _tree(project, [("100644", "inputs.py", _blob(project, ZERO_BIAS))])
    scale = [(m, n, _blob(project, kernel) if n == "kernel.py" else s) for m, n, s in _entries(project, "main:" + T)]
    scale.append(("40000", "x", _tree(project, [("40000", "..", up)])))
    sha = _commit_scale_tree(project, scale, "smaller block")
    out = conclude(project)
    note = notes_json(project, sha)
    assert note["verdict"]["decision"] == "invalid", note["verdict"]
    assert f"{T}/x/../inputs.py" in note["offending_files"] and f"{T}/x/../inputs.py" in note["verdict"]["reason"]
    assert rev(project, "main") == trunk and "#0001 reverted: archived" in out


def test_a_tree_with_one_name_twice_is_not_kept(project):
    # A red-team plant (2026-12-06): kernel.py twice in one tree (the wrong kernel first, as `git show`
    # reads it; a faster right one second, as the judge read it): measured, kept and merged.
    trunk = rev(project, "main")
    text = (project / KERNEL).read_text()
    wrong = _blob(project, text.replace(*SKIP_BIAS))
    right = _blob(project, text.replace("BLOCK = 64", "BLOCK = 32"))
    scale = []
    for m, n, s in _entries(project, "main:" + T):
        scale += [(m, n, wrong), (m, n, right)] if n == "kernel.py" else [(m, n, s)]
    sha = _commit_scale_tree(project, scale, "smaller block")
    out = autogk_in(project, "iterate", "-n", "0", "--agent", "tune", "--max-time", "0.001", check=False).stdout
    assert rev(project, "main") == trunk, out
    assert rev(project, "refs/autogk/kept/scale/0001") is None
    assert (notes_json(project, sha) or {}).get("verdict", {}).get("decision") != "keep"


def test_a_replace_ref_does_not_show_the_judge_another_kernel(project):
    # A red-team plant (2026-12-06): the wrong kernel committed, its blob replaced (`git replace`) by a
    # faster right one; autogk read the replacement, measured it and kept the commit, whose own blob (what
    # the trunk holds once the replace ref is deleted) skips the bias.
    trunk = rev(project, "main")
    git(project, "checkout", "-qb", "autogk/scale/0001-skip-the-bias")
    text = (project / KERNEL).read_text()
    wrong = text.replace(*SKIP_BIAS)
    git(project, "replace", _blob(project, wrong), _blob(project, text.replace("BLOCK = 64", "BLOCK = 32")))
    (project / KERNEL).write_text(wrong)
    sha = commit_no_verify(project, "skip the bias")
    out = conclude(project)
    assert rev(project, "main") == trunk and rev(project, "refs/autogk/kept/scale/0001") is None, out
    assert notes_json(project, sha)["verdict"]["decision"] == "revert", notes_json(project, sha)["verdict"]
