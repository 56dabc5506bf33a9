"""A new user's first hour: init's way forward, the user's own kernel, quiet MLflow, bisect's counts."""
from __future__ import annotations

import json

import pytest

from conftest import DATA, autogk, autogk_in, git
from review_support import copy_project, iterated_template

SCALE = DATA / "scale"


def _init(tmp_path, *extra: str, check: bool = True, env: dict | None = None):
    tmp_path.mkdir(parents=True, exist_ok=True)
    return autogk(tmp_path, "init", "proj", "--definition", str(SCALE / "definition.json"),
                  "--workloads", str(SCALE / "workloads.jsonl"), *extra, check=check, env=env)


def test_init_without_tunables_names_the_three_ways_forward(tmp_path):
    out = _init(tmp_path, "--no-check").stdout
    assert "nothing to try yet" in out and "declares no tunables" in out
    nexts = [ln for ln in out.splitlines() if ln.startswith("next: ")]
    assert len(nexts) == 3
    assert "# autogk: tune [" in nexts[0]
    assert "export ANTHROPIC_API_KEY=" in nexts[1]
    assert "--agent command" in nexts[2] and "[agent] command" in nexts[2]


def test_init_says_when_workloads_are_too_big_for_the_cpu(tmp_path):
    out = _init(tmp_path, "--no-check", env={"AUTOGK_BENCH_CPU_MAX_NUMEL": "1"}).stdout
    warn = next(ln for ln in out.splitlines() if ln.startswith("warning: none of the 5 workload(s)"))
    assert "over [bench] cpu_max_numel" in warn and "> 1)" in warn
    assert "iterate --backend local" in warn and "AUTOGK_BENCH_CPU_MAX_NUMEL=" in warn
    # The limit it names admits every workload it skipped (the largest, n=4096: 8192 input elements).
    assert "AUTOGK_BENCH_CPU_MAX_NUMEL=8192 " in warn and "cpu_max_numel = 8192`" in warn, warn
    out = _init(tmp_path / "again", "--no-check").stdout  # the default limit fits every scale workload
    assert "cpu_max_numel" not in out


def test_init_kernel_starts_from_the_users_own_kernel(tmp_path):
    out = _init(tmp_path, "--kernel", str(SCALE / "kernel.py")).stdout
    root = tmp_path / "proj"
    assert (root / "kernels/scale/kernel.py").read_text() == (SCALE / "kernel.py").read_text()
    assert git(root, "status", "--porcelain") == ""
    assert "correct on 5 workload(s)" in out  # every workload; --check ran the user's kernel, not the reference
    nexts = [ln for ln in out.splitlines() if ln.startswith("next: ")]
    assert len(nexts) == 1 and "iterate --target scale" in nexts[0] and "BLOCK" in nexts[0]
    info = json.loads(autogk(root, "iterate", "-n", "1", "--json").stdout)
    assert len(info["experiments"]) == 1


def test_init_kernel_without_run_is_an_error_naming_the_fix(tmp_path):
    bad = tmp_path / "mine.py"
    bad.write_text("import triton\n\ndef launch(x, y):\n    pass\n")
    out = _init(tmp_path, "--kernel", str(bad), check=False)
    assert out.returncode == 1
    assert "defines no top-level `run` function" in out.stderr and "run(x, bias, scale, out)" in out.stderr
    bad.write_text("def run(x, y:\n")
    out = _init(tmp_path, "--kernel", str(bad), check=False)
    assert out.returncode == 1 and "is not valid Python (line 1" in out.stderr


@pytest.fixture
def iterated(template_project, tmp_path_factory, tmp_path):
    return copy_project(iterated_template(template_project, tmp_path_factory), tmp_path / "proj")


def test_mlflow_log_lines_only_with_v(iterated, tmp_path, own_cache):
    """MLflow's migrations print INFO lines when they build a store (a user's first, once per MLflow
    version: later stores copy it); autogk hides them unless -v."""
    out = autogk(iterated, "report")
    assert "INFO mlflow" not in out.stderr + out.stdout, out.stderr
    assert "logged to MLflow" in out.stdout
    built = list((own_cache / "mlflow-stores").glob("*.db"))
    assert built, "the migrations did not run in this call: the first half shows nothing"
    for f in built:
        f.unlink()
    (tmp_path / "other").mkdir()
    other = copy_project(iterated, tmp_path / "other" / "proj")
    out = autogk(other, "-v", "report")
    assert "INFO mlflow" in out.stderr


def test_bisect_whose_bad_is_correct_never_benchmarks_good(iterated):
    """Correctness bisects judge BAD first: a BAD that is correct ends it before GOOD costs a check."""
    root = iterated
    kernel = root / "kernels/scale/kernel.py"
    kernel.write_text(kernel.read_text() + "# a comment no note has seen\n")
    git(root, "commit", "-qam", "comment")
    good = git(root, "rev-parse", "HEAD").strip()  # its kernel tree has no note: judging it is a benchmark
    kernel.write_text(kernel.read_text() + "# another\n")
    git(root, "commit", "-qam", "another comment")
    out = json.loads(autogk(root, "bisect", good, "main", "--json").stdout)
    assert out["first_bad"] is None  # BAD is correct: nothing to find
    assert (out["reused"], out["benchmarked"]) == (0, 1), out
    assert [s["commit"] for s in out["steps"]] == [git(root, "rev-parse", "main").strip()]
    text = autogk(root, "bisect", good, "main").stdout
    # The second run answers BAD from the bisect note the first one wrote.
    assert "1 commit(s) judged: 1 from notes, 0 benchmarked" in text, text
    assert f"GOOD ({good}) was not judged" in text


def test_log_filters_by_the_word_it_prints(project):
    out = autogk_in(project, "log", "--verdict", "held")
    assert out.returncode == 0 and "no experiments match" in out.stdout, out.stderr


def test_a_config_that_does_not_load_is_said_once_by_read_commands(project):
    with open(project / ".autogk.toml", "a") as f:
        f.write("[bench\n")
    out = autogk(project, "log")
    assert out.returncode == 0
    warns = [ln for ln in out.stderr.splitlines() if ln.startswith("warning:")]
    assert len(warns) == 1 and "not valid TOML" in warns[0] and "fix the syntax" in warns[0], out.stderr


def test_a_mistyped_autogk_variable_is_warned_about(project):
    out = autogk(project, "log", env={"AUTOGK_BENCH_CPU_MAX_NUMLE": "5", "AUTOGK_BENCH_BACKEND": "interpret"})
    warns = [ln for ln in out.stderr.splitlines() if ln.startswith("warning:")]
    assert warns == ["warning: AUTOGK_BENCH_CPU_MAX_NUMLE is set but autogk reads no such variable; "
                     "did you mean AUTOGK_BENCH_CPU_MAX_NUMEL?"], out.stderr


def test_hooks_and_pack_print_json(project):
    hooks = json.loads(autogk_in(project, "hooks", "install", "--json").stdout)
    assert hooks["hooks"] and set(hooks["hooks"].values()) == {"installed"}, hooks
    info = json.loads(autogk_in(project, "pack", "--force", "--json").stdout)
    assert info["commit"] == git(project, "rev-parse", "main").strip() and info["path"].endswith(".json")
    assert "no best kernel" in info["why"] and "run `autogk iterate`" in info["why"], info


def test_a_hint_names_autogk_as_it_can_be_called(project):
    """Before `source .venv/bin/activate` PATH finds no `autogk`: a hint's command is the script's full path."""
    import os
    from conftest import BIN
    path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if p != str(BIN))
    out = autogk(project, "show", "999", check=False, env={"PATH": path})
    assert out.returncode == 1 and f"hint: list them with `{BIN / 'autogk'} log`" in out.stderr, out.stderr
