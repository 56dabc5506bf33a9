"""What a user gets from a run: the best known kernels (`init --start best`), a FlashInfer-Bench Solution
of a kernel (`pack`), and the run's history as one git bundle that `git clone` + `autogk sync` read."""
from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, autogk_in, git, interpreted
from review_support import copy_project, iterate_report, iterated_template

EXAMPLES = REPO / "autogk_git" / "examples"
BEST = REPO / "autogk_git" / "best_kernels"
SA = "dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64"
IX = "dsa_topk_indexer_fp8_h64_d128_topk2048_ps64"


# --- init --start best ---------------------------------------------------------------------------------

def test_start_best_begins_from_the_shipped_best_kernel_and_checks_it(tmp_path):
    # The check's subject here is which kernel it judged, not how far the interpreter reaches: the three
    # smallest workloads (batch 1-16) rather than the default cap's six (batch 128 and 250 take most of a minute).
    out = autogk_in(tmp_path, "init", "demo", "--example", "rmsnorm_h4096", "--start", "best", "--json",
                    env={"AUTOGK_BENCH_CPU_MAX_NUMEL": "70000"})
    info = json.loads(out.stdout)
    kernel = tmp_path / "demo" / "kernels" / "rmsnorm_h4096" / "kernel.py"
    assert kernel.read_text() == (BEST / "rmsnorm_h4096" / "kernel.py").read_text()
    assert kernel.read_text() != (EXAMPLES / "rmsnorm_h4096" / "kernel.py").read_text()
    assert info["baseline"]["correct"] is True  # checked in the interpreter, under the capped bands
    assert len(info["baseline"]["checked_workloads"]) == 3, info["baseline"]
    assert "best known kernel of rmsnorm_h4096: experiment #0003" in out.stderr
    message = git(tmp_path / "demo", "log", "-1", "--format=%B")
    assert "(kernel: the best known one)" in message and "best_kernels/rmsnorm_h4096/SOURCE.md" in message


def test_every_shipped_best_kernel_belongs_to_a_bundled_target_and_says_where_it_came_from():
    from autogk_git import scaffold
    shipped = scaffold.best_kernels()
    assert SA in shipped and IX in shipped and "rmsnorm_h4096" in shipped
    for name in shipped:
        assert name in scaffold.examples()
        assert any(line.startswith("From: experiment #") for line in (BEST / name / "SOURCE.md").read_text().splitlines())
        tree = ast.parse((BEST / name / "kernel.py").read_text())
        run = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "run")
        d = json.loads((EXAMPLES / name / "definition.json").read_text())
        assert [a.arg for a in run.args.args] == [*d["inputs"], *d["outputs"]]


def test_start_best_on_a_target_without_one_says_so_and_writes_nothing(tmp_path, monkeypatch):
    from autogk_git import scaffold
    shipped = scaffold.best_kernels()
    monkeypatch.setattr(scaffold, "best_kernels", lambda: [n for n in shipped if n != IX])  # as if none shipped
    out = autogk_in(tmp_path, "init", "demo", "--example", IX, "--start", "best", check=False)
    assert out.returncode == 1
    assert f"the bundled target {IX} ships no best known kernel" in out.stderr
    assert f"hint: leave --start out to begin from the starting kernel: autogk init DIR --example {IX}" in out.stderr
    assert not (tmp_path / "demo").exists()
    both = autogk_in(tmp_path, "init", "demo", "--example", SA, "--start", "best",
                     "--kernel", str(BEST / SA / "kernel.py"), check=False)
    assert both.returncode == 1 and "--start best and --kernel" in both.stderr
    assert not (tmp_path / "demo").exists()


def test_start_best_from_a_definition_that_is_not_bundled_says_so(tmp_path):
    d = json.loads((EXAMPLES / "rmsnorm_h4096" / "definition.json").read_text())
    d["name"] = "rmsnorm_h4096_mine"
    (tmp_path / "def.json").write_text(json.dumps(d))
    out = autogk_in(tmp_path, "init", "demo", "--definition", str(tmp_path / "def.json"), "--start", "best",
                    check=False)
    assert out.returncode == 1 and "rmsnorm_h4096_mine is not a bundled target" in out.stderr


BEST_CHECK = r"""
import importlib.util, json, sys
import torch
sys.path.insert(0, sys.argv[1])
from autogk_git.bench.judge import rules
ex, best, target = sys.argv[2], sys.argv[3], sys.argv[4]
def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); return m
gen, ker = load(f"{ex}/{target}/inputs.py", "gen"), load(f"{best}/{target}/kernel.py", "ker")
d = json.load(open(f"{ex}/{target}/definition.json"))
ns = {}; exec(d["reference"], ns)
consts = {n: a["value"] for n, a in d["axes"].items() if a.get("type") == "const"}
for axes in json.loads(sys.argv[5]):
    ax = {**consts, **axes}
    x = gen.generate(dict(ax), d, 7, "cpu")
    args = [x[n] for n in d["inputs"]]
    want = ns["run"](*args)
    outs = [torch.full_like(w, float("nan")) for w in want]
    ker.run(*args, *outs)
    for (name, spec), o, w in zip(d["outputs"].items(), outs, want):
        rules.judge(name, spec["dtype"], o, w, rules.declared(gen).get(name), x, ax, gen)
    print("BEST PASSED", axes)
"""


def test_the_shipped_sparse_attention_best_kernel_is_correct_in_the_interpreter():
    shapes = [{"num_tokens": 1, "num_pages": 8}, {"num_tokens": 3, "num_pages": 20}]
    out = interpreted(BEST_CHECK, REPO, EXAMPLES, BEST, SA, json.dumps(shapes))
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.count("BEST PASSED") == len(shapes)


def test_every_shipped_kernel_is_one_the_tuner_reads_whole(tmp_path):
    """The tuner reads a kernel's tunables strictly and stops at the first declaration it cannot read. The
    shipped best indexer kernel had four with a note after the list of choices: `init --start best` said
    "the offline tuner tries the 6 tunable(s)" (read leniently), and `iterate` then stopped before its first
    experiment (session 66)."""
    from types import SimpleNamespace

    from autogk_git import scaffold, tunables
    kernels = sorted(BEST.glob("*/kernel.py")) + sorted(EXAMPLES.glob("*/kernel.py"))
    assert len(kernels) >= 6, kernels
    for k in kernels:
        assert tunables.parse(k.read_text(), strict=True, where=str(k.relative_to(REPO))), k
    out = autogk_in(tmp_path, "init", "demo", "--example", IX, "--start", "best", "--no-check").stdout
    found = tunables.parse((BEST / IX / "kernel.py").read_text(), strict=True)
    assert f"the offline tuner tries the {len(found)} tunable(s)" in out and "RANK_TILE" in out, out
    # A kernel the tuner cannot read: `init` says so, with the line, instead of counting the others.
    bad = "BLOCK = 64  # autogk: tune [32, 64]\nMASK = True  # autogk: tune [True, False] (try off)\n"
    lines = scaffold.next_steps(SimpleNamespace(name="t", rel="kernels/t"), bad, "autogk")
    assert lines[0].startswith("the offline tuner would stop at once: kernels/t/kernel.py line 2"), lines
    assert "MASK = True" in lines[0] and lines[1].startswith("next: write it as"), lines


# --- pack: a FlashInfer-Bench Solution -----------------------------------------------------------------

def check_solution_schema(sol: dict, definition: dict) -> None:
    """The facts of FlashInfer-Bench's Solution schema (docs/flashinfer-trace/solution.mdx and
    flashinfer_bench/data/solution.py on its main branch), checked on the JSON itself."""
    for field in ("name", "definition", "author", "spec", "sources"):  # required, non-empty
        assert sol.get(field), field
    assert sol["definition"] == definition["name"]
    spec = sol["spec"]
    assert spec["language"] in ("python", "triton", "cpp", "cuda", "tilelang") and spec["language"] == "triton"
    assert isinstance(spec["target_hardware"], list) and spec["target_hardware"]
    assert spec["entry_point"].count("::") == 1
    entry_file, entry_fn = spec["entry_point"].split("::")
    assert isinstance(spec.get("dependencies", []), list)
    assert spec.get("destination_passing_style", True) is True  # autogk's kernels write outputs in place
    paths = [s["path"] for s in sol["sources"]]
    assert len(set(paths)) == len(paths) and entry_file in paths
    for s in sol["sources"]:
        assert s["path"] and s["content"] and not Path(s["path"]).is_absolute() and ".." not in Path(s["path"]).parts
    # Python/Triton: parameter names exactly the definition's inputs, then (DPS) its outputs, positional.
    tree = ast.parse(next(s["content"] for s in sol["sources"] if s["path"] == entry_file))
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == entry_fn)
    assert [a.arg for a in fn.args.args] == [*definition["inputs"], *definition["outputs"]]


@pytest.mark.parametrize("target,start", [(SA, "starting"), (SA, "best"), (IX, "starting"), (IX, "best")])
def test_a_packed_dsa_kernel_is_a_flashinfer_bench_solution(tmp_path, target, start):
    autogk_in(tmp_path, "init", "demo", "--example", target, "--start", start, "--no-check")
    root = tmp_path / "demo"
    refused = autogk_in(root, "pack", check=False)  # nothing judged it yet: refused, with the way out
    assert refused.returncode == 1 and "--force" in refused.stderr
    # The shipped best kernel is named as such, with the run that judged it (its SOURCE.md): not "a commit
    # made outside an experiment", which is all the starting kernel can be said to be.
    shipped = f"autogk_git/best_kernels/{target}/SOURCE.md"
    assert (shipped in refused.stderr) == (start == "best"), refused.stderr
    assert ("made outside an experiment" in refused.stderr) == (start == "starting"), refused.stderr
    autogk_in(root, "pack", "--force", "-o", str(tmp_path / "sol.json"))
    sol = json.loads((tmp_path / "sol.json").read_text())
    assert (shipped in sol["description"]) == (start == "best"), sol["description"]
    definition = json.loads((EXAMPLES / target / "definition.json").read_text())
    check_solution_schema(sol, definition)
    kernel = (BEST if start == "best" else EXAMPLES) / target / "kernel.py"
    assert next(s["content"] for s in sol["sources"] if s["path"] == "kernel.py") == kernel.read_text()
    assert "UNCONFIRMED" in sol["description"]
    # And flashinfer-bench's own model reads it back, in a process of its own.
    code = ("import sys\nfrom flashinfer_bench.data import Solution\n"
            "s = Solution.model_validate_json(open(sys.argv[1]).read())\nprint(s.definition, s.spec.entry_point)\n")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "sol.json")], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == [target, "kernel.py::run"]


# --- sharing a run as one git bundle -------------------------------------------------------------------

def test_a_run_shared_as_a_git_bundle_clones_and_syncs(template_project, tmp_path_factory, tmp_path):
    root = copy_project(iterated_template(template_project, tmp_path_factory), tmp_path / "proj")
    exps = {e["number"]: e["decision"] for e in iterate_report(root)["experiments"]}
    bundle = tmp_path / "run.bundle"
    git(root, "bundle", "create", str(bundle), "--all")  # the README's recipe: branches, notes, experiment refs
    listed = git(tmp_path, "bundle", "list-heads", str(bundle))
    assert "refs/notes/autogk/results" in listed and "refs/autogk/" in listed

    clone = tmp_path / "copy"
    git(tmp_path, "clone", "-q", str(bundle), str(clone))
    out = json.loads(autogk_in(clone, "sync", "--json").stdout)
    assert out["fetched_from"] == ["origin"] and out["logged"] == len(exps)
    rows = json.loads(autogk_in(clone, "log", "--json").stdout)
    assert {r["number"]: r["decision"] for r in rows} == exps
    assert {r["commit"] for r in rows} == {r["commit"] for r in json.loads(autogk_in(root, "log", "--json").stdout)}
