"""`autogk init` on bundled examples and on real FlashInfer-Bench definitions."""
from __future__ import annotations

import json

import pytest

from conftest import SHARED, autogk, autogk_in, git, notes_json

needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason=f"{SHARED} (FlashInfer-Bench trace data) is absent")


def test_example_in_a_new_directory_commits_config_target_and_hooks(tmp_path):
    out = autogk(tmp_path, "init", "proj", "--example", "rmsnorm_h4096", "--no-check", "--json")
    info = json.loads(out.stdout)
    proj = tmp_path / "proj"
    assert info["target"] == "rmsnorm_h4096" and info["needs_data"] == []
    assert git(proj, "status", "--porcelain").strip() == ""
    tracked = git(proj, "ls-files").split()
    for f in ("definition.json", "workloads.jsonl", "kernel.py", "program.md"):
        assert f"kernels/rmsnorm_h4096/{f}" in tracked
    assert ".autogk.toml" in tracked
    assert (proj / ".git" / "hooks" / "post-commit").read_text().count("autogk-hook") == 1
    assert git(proj, "config", "notes.rewriteRef").strip() == "refs/notes/autogk/*"


def test_init_in_an_existing_repo_never_clobbers(tmp_path):
    git(tmp_path, "init", "-q")
    (tmp_path / "kernels" / "rmsnorm_h4096").mkdir(parents=True)
    (tmp_path / "kernels" / "rmsnorm_h4096" / "kernel.py").write_text("# mine\n")
    out = autogk_in(tmp_path, "init", "--here", "--example", "rmsnorm_h4096", "--no-check", check=False)
    assert out.returncode == 1
    assert "refusing to overwrite" in out.stderr and "--name" in out.stderr
    assert (tmp_path / "kernels" / "rmsnorm_h4096" / "kernel.py").read_text() == "# mine\n"
    # Another name works, and leaves the user's file alone.
    autogk_in(tmp_path, "init", "--here", "--example", "rmsnorm_h4096", "--name", "norm2", "--no-check")
    assert (tmp_path / "kernels" / "norm2" / "kernel.py").exists()


def test_bad_input_gives_a_clear_error(tmp_path):
    out = autogk_in(tmp_path, "init", "--example", "nope", check=False)
    assert out.returncode == 1 and "bundled examples: " in out.stderr and "rmsnorm_h4096" in out.stderr
    bad = tmp_path / "bad.json"
    bad.write_text('{"name": "x", "axes": {}, "inputs": {"a": {"shape": ["n"], "dtype": "float32"}}, '
                   '"outputs": {}, "reference": "def run(a):\\n    return a\\n"}')
    out = autogk_in(tmp_path, "init", "--definition", str(bad), check=False)
    assert out.returncode == 1 and "uses axis 'n', which is not in axes" in out.stderr


@needs_shared
@pytest.mark.parametrize("hidden", [2048, 7168])  # 4096 is the bundled example (test above)
def test_real_rmsnorm_definitions_init_and_check(tmp_path, hidden):
    d = SHARED / "definitions" / "rmsnorm" / f"rmsnorm_h{hidden}.json"
    w = SHARED / "workloads" / "rmsnorm" / f"rmsnorm_h{hidden}.jsonl"
    out = autogk_in(tmp_path, "init", "proj", "--definition", str(d), "--workloads", str(w))
    assert "flashinfer-bench accepts the definition" in out.stdout
    assert "correct on" in out.stdout and "INCORRECT" not in out.stdout
    n_lines = len([line for line in w.read_text().splitlines() if line.strip()])
    assert len((tmp_path / "proj" / "kernels" / f"rmsnorm_h{hidden}" / "workloads.jsonl").read_text().splitlines()) == n_lines


@needs_shared
def test_real_rmsnorm_definition_end_to_end_with_a_hand_made_experiment(tmp_path):
    d = SHARED / "definitions" / "rmsnorm" / "rmsnorm_h2048.json"
    w = SHARED / "workloads" / "rmsnorm" / "rmsnorm_h2048.jsonl"
    autogk(tmp_path, "init", "proj", "--definition", str(d), "--workloads", str(w), "--no-check")
    proj = tmp_path / "proj"
    git(proj, "checkout", "-qb", "autogk/rmsnorm_h2048/0001-fp32-weight-first")
    k = proj / "kernels" / "rmsnorm_h2048" / "kernel.py"
    k.write_text(k.read_text().replace("y = (x * inv_rms) * weight.to(torch.float32)",
                                       "y = x * (inv_rms * weight.to(torch.float32))"))
    git(proj, "commit", "-qam", "scale by weight first")
    sha = git(proj, "rev-parse", "HEAD").strip()
    assert notes_json(proj, sha)["correct"] is True
    proc = autogk(proj, "iterate", "-n", "1", check=False)
    out = proc.stdout
    assert "#0001 held untimed" in out  # correct on CPU, but untimed: held, not merged ([bench] untimed)
    # The starting kernel declares no tunables: the tuner says so, and the run exits non-zero naming
    # the ways forward (tunables, an API key, a command agent).
    assert "nothing to tune" in out and proc.returncode == 1
    assert "# autogk: tune" in proc.stderr and "ANTHROPIC_API_KEY" in proc.stderr


@needs_shared
@pytest.mark.parametrize("name,needs", [
    ("dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64", ["sparse_indices"]),
    # int8 there packs fp8 values with float32 scales: random bytes make NaN scales.
    ("dsa_topk_indexer_fp8_h64_d128_topk2048_ps64", ["k_index_cache_fp8", "seq_lens", "block_table"]),
])
def test_dsa_definitions_say_which_inputs_need_data(tmp_path, name, needs):
    # Renamed, so autogk does not recognise its bundled target (tests/test_dsa_targets.py covers that).
    data = json.loads((SHARED / "definitions" / "dsa_paged" / f"{name}.json").read_text())
    data["name"] = "my_" + name
    d = tmp_path / "def.json"
    d.write_text(json.dumps(data))
    out = autogk_in(tmp_path, "init", "proj", "--definition", str(d), "--json")
    info = json.loads(out.stdout)
    assert info["needs_data"] == needs
    assert "random data cannot stand for them" in out.stderr and "inputs.py" in out.stderr
    assert "Traceback" not in out.stderr
    proj = tmp_path / "proj"
    for cmd in (["bench"], ["iterate", "-n", "1"]):
        res = autogk_in(proj, *cmd, check=False)
        assert res.returncode == 1, res.stdout + res.stderr
        assert "random data cannot stand for them" in res.stderr and "Traceback" not in res.stderr


def _tree(root) -> list[str]:
    """Files under root, outside .git (git's own bookkeeping, objects and reflogs, is compared by refs)."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if ".git" not in p.relative_to(root).parts)


def test_a_broken_reference_is_refused_at_init_naming_the_file_and_nothing_is_left(tmp_path):
    from conftest import DATA
    d = json.loads((DATA / "scale" / "definition.json").read_text())
    d["reference"] = "def run(x, bias, scale):\n    return (x * scale + bias)[:-1]\n"  # one element short
    bad = tmp_path / "short.json"
    bad.write_text(json.dumps(d))
    out = autogk_in(tmp_path, "init", "proj", "--definition", str(bad), "--workloads",
                    str(DATA / "scale" / "workloads.jsonl"), check=False)
    assert out.returncode == 1
    assert f"error: {bad}: the reference's output out has shape [49]" in out.stderr
    assert "kernel" not in out.stderr.split("\n")[0]  # the target's fault, not a kernel's
    assert not (tmp_path / "proj").exists()


def test_init_with_an_incorrect_starting_kernel_fails_and_takes_everything_back(tmp_path):
    from conftest import DATA
    kernel = tmp_path / "zero.py"
    kernel.write_text("def run(x, bias, scale, out):\n    out.zero_()\n")
    # In a new folder: no folder, no repository left.
    out = autogk_in(tmp_path, "init", "proj", "--definition", str(DATA / "scale" / "definition.json"),
                    "--workloads", str(DATA / "scale" / "workloads.jsonl"), "--kernel", str(kernel), check=False)
    assert out.returncode == 1 and f"--kernel {kernel} is incorrect" in out.stderr
    assert not (tmp_path / "proj").exists()
    # In an existing repository (--here): its branch, index, files, config and hooks exactly as before.
    repo_dir = tmp_path / "mine"
    repo_dir.mkdir()
    git(repo_dir, "init", "-q")
    (repo_dir / "README").write_text("mine\n")
    (repo_dir / ".gitignore").write_text("*.tmp\n")
    git(repo_dir, "add", ".")
    git(repo_dir, "commit", "-qm", "mine")
    before = (git(repo_dir, "for-each-ref"), git(repo_dir, "ls-files", "-s"), git(repo_dir, "config", "--list", "--local"),
              sorted(p.name for p in (repo_dir / ".git" / "hooks").iterdir()), _tree(repo_dir),
              (repo_dir / ".gitignore").read_text())
    out = autogk_in(repo_dir, "init", "--here", "--definition", str(DATA / "scale" / "definition.json"),
                    "--workloads", str(DATA / "scale" / "workloads.jsonl"), "--kernel", str(kernel), check=False)
    assert out.returncode == 1 and "is incorrect" in out.stderr
    after = (git(repo_dir, "for-each-ref"), git(repo_dir, "ls-files", "-s"), git(repo_dir, "config", "--list", "--local"),
             sorted(p.name for p in (repo_dir / ".git" / "hooks").iterdir()), _tree(repo_dir),
             (repo_dir / ".gitignore").read_text())
    assert [a for a in after if a not in before] == []
    assert git(repo_dir, "status", "--porcelain") == "" and not (repo_dir / ".git" / "autogk").exists()


def test_init_inside_a_repository_needs_here_or_makes_the_new_folder_its_own(tmp_path):
    from conftest import DATA
    outer = tmp_path / "outer"
    outer.mkdir()
    git(outer, "init", "-q")
    (outer / "f").write_text("x\n")
    git(outer, "add", "f")
    git(outer, "commit", "-qm", "outer")
    head = git(outer, "rev-parse", "HEAD")
    args = ("--definition", str(DATA / "scale" / "definition.json"), "--workloads", str(DATA / "scale" / "workloads.jsonl"),
            "--no-check")
    out = autogk_in(outer, "init", *args, check=False)
    assert out.returncode == 1
    assert f"inside the existing git repository {outer}" in out.stderr and "--here" in out.stderr
    assert not (outer / "kernels").exists() and not (outer / ".autogk.toml").exists()
    # A new folder inside it (the README's `autogk init my-kernels`) becomes a repository of its own.
    out = autogk_in(outer, "init", "my-kernels", *args)
    assert "making it a repository of its own" in out.stdout
    assert (outer / "my-kernels" / ".git").is_dir() and (outer / "my-kernels" / "kernels" / "scale").is_dir()
    assert git(outer, "rev-parse", "HEAD") == head and git(outer, "status", "--porcelain") == "?? my-kernels/\n"


def test_init_never_writes_into_the_installed_package(tmp_path, monkeypatch):
    import autogk_git
    from conftest import DATA
    root = tmp_path / "checkout"
    (root / "pkg" / "examples").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    git(root, "init", "-q")
    (root / ".autogk.toml").write_text('[project]\ntargets = "pkg/examples"\n')
    git(root, "add", ".")
    git(root, "commit", "-qm", "a checkout that is itself a project, its targets in its package")
    monkeypatch.setattr(autogk_git, "__file__", str(root / "pkg" / "__init__.py"))  # an editable install of it
    out = autogk_in(root, "init", "--here", "--definition", str(DATA / "scale" / "definition.json"), "--no-check",
                    check=False)
    assert out.returncode == 1 and "inside autogk's own package" in out.stderr
    assert list((root / "pkg" / "examples").iterdir()) == [] and git(root, "status", "--porcelain") == ""


def test_init_in_a_project_on_another_branch_than_its_trunk_is_refused(project):
    git(project, "checkout", "-q", "-b", "side")
    from conftest import DATA
    out = autogk_in(project, "init", "--here", "--example", "rmsnorm_h4096", "--no-check", check=False)
    assert out.returncode == 1 and "the project's trunk is main but side is checked out" in out.stderr
    assert "git switch main" in out.stderr and not (project / "kernels" / "rmsnorm_h4096").exists()


def test_iterate_on_a_target_missing_from_the_trunk_says_how_to_add_it(project):
    git(project, "checkout", "-q", "-b", "side")
    (project / "kernels" / "s2").mkdir()
    for f in ("definition.json", "workloads.jsonl", "kernel.py"):
        (project / "kernels" / "s2" / f).write_bytes((project / "kernels" / "scale" / f).read_bytes())
    git(project, "add", "kernels/s2")
    git(project, "commit", "-qm", "s2 on a side branch", "--no-verify")
    out = autogk_in(project, "iterate", "--target", "s2", "-n", "1", check=False,
                    env={"AUTOGK_TRACKING_ENABLED": "false", "AUTOGK_BENCH_BACKEND": "interpret"})
    assert out.returncode == 1
    assert "target s2 (kernels/s2/) is not on the trunk main" in out.stderr
    assert "git checkout side -- kernels/s2" in out.stderr
