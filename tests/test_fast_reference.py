"""A target's fast reference (reference.py beside definition.json): proven equal to the definition's own
reference on every workload before the judge uses it, proven again when any file it depends on changes,
never used when it disagrees, and read from the trunk like the rest of the target."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import torch

from conftest import autogk_in, git, notes_json

EXAMPLES = Path(__file__).resolve().parents[1] / "autogk_git" / "examples"
FAST = sorted(p.parent.name for p in EXAMPLES.glob("*/reference.py"))
T = "kernels/scale"
# These tests are about when a proof is made and carried: each starts from an empty cache of its own.
pytestmark = pytest.mark.usefixtures("own_cache")
RIGHT = "import torch\n\n\ndef run(x, bias, scale):\n    return torch.addcmul(bias, x, torch.tensor(scale))\n"
WRONG = "import torch\n\n\ndef run(x, bias, scale):\n    return x * scale\n"  # drops the bias


@pytest.fixture(autouse=True)
def no_tracking(monkeypatch):
    monkeypatch.setenv("AUTOGK_TRACKING_ENABLED", "0")


# Small shapes of each DSA layout (decode, prefill, a pool smaller than a row's top-k, one token), run
# besides the bundled workloads: those may all be above the CPU's size limit (contest-sized caches).
SMALL_AXES = {
    "num_tokens": [{"num_tokens": 1, "num_pages": 8}, {"num_tokens": 3, "num_pages": 20},
                   {"num_tokens": 40, "num_pages": 6}, {"num_tokens": 70, "num_pages": 1}],
    "batch_size": [{"batch_size": 1, "max_num_pages": 3, "num_pages": 3},
                   {"batch_size": 5, "max_num_pages": 40, "num_pages": 90},
                   {"batch_size": 60, "max_num_pages": 4, "num_pages": 8}],
}


def bundled(name: str) -> tuple[dict, list[dict], str | None]:
    """The definition, every workload of every bundled set (workloads*.jsonl), and inputs.py."""
    d = EXAMPLES / name
    wls = [json.loads(line)["workload"] for f in sorted(d.glob("workloads*.jsonl"))
           for line in f.read_text().splitlines() if line.strip()]
    gen = d / "inputs.py"
    return json.loads((d / "definition.json").read_text()), wls, gen.read_text() if gen.exists() else None


def small(definition: dict, wls: list[dict]) -> list[dict]:
    """SMALL_AXES as workloads: the bundled ones' scalar literals, nothing else of theirs (a workload may
    carry a layout of its own sized for its axes)."""
    first = next(iter(definition["axes"]))
    scalars = {k: v for k, v in wls[0].get("inputs", {}).items() if v.get("type") == "scalar"}
    return [{"uuid": f"small-{i}", "axes": axes, "inputs": scalars} for i, axes in enumerate(SMALL_AXES.get(first, []))]


def prove_bundled(name: str, max_numel: int, extra: bool = False) -> dict:
    from autogk_git.bench import refproof
    definition, wls, gen = bundled(name)
    job = {"definition": definition, "workloads": wls + (small(definition, wls) if extra else []),
           "fast": (EXAMPLES / name / "reference.py").read_text(),
           "generator": gen, "blob_root": str(EXAMPLES / name), "cpu_max_numel": max_numel}
    return refproof.prove(job)


def test_both_dsa_targets_ship_a_fast_reference():
    assert {"dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64", "dsa_topk_indexer_fp8_h64_d128_topk2048_ps64"} <= set(FAST)


@pytest.mark.parametrize("name", FAST)
def test_a_bundled_fast_reference_agrees_on_every_workload_the_cpu_runs(name):
    from autogk_git import config
    from autogk_git.bench.job import numel
    limit = config.parse({}).bench.cpu_max_numel
    definition, wls, _ = bundled(name)
    rec = prove_bundled(name, limit, extra=True)
    fits = [w["uuid"] for w in wls + small(definition, wls) if numel(definition, w) <= limit]
    assert len(fits) >= 3, "too few workloads fit the CPU: the test would prove little"
    got = rec["workloads"]
    assert {u for u, w in got.items() if w["status"] == "agrees"} == set(fits), got
    for u, w in got.items():
        if u not in fits:
            assert w["status"] == "skipped" and "CPU size limit" in w["reason"], w
        else:
            assert {"seed 1234", "seed 4321"} <= set(w["sets"]), w


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("name", FAST)
def test_a_bundled_fast_reference_agrees_on_every_workload_on_the_gpu(name):
    rec = prove_bundled(name, 0)
    assert rec["device"] == "cuda"
    bad = {u[:8]: w for u, w in rec["workloads"].items() if w["status"] != "agrees"}
    assert not bad, bad


# ------------------------------------------------------------------------------------------------
# The proof, its cache and the job: on the small `scale` target of the tests.
# ------------------------------------------------------------------------------------------------

def scale_target(project):
    from autogk_git.project import Project
    return Project(project).target("scale")


def check(project, say=None) -> str:
    """The proof as the loop runs it, in this process (the loop's own path, isolated, is tested below)."""
    from autogk_git.bench import refproof
    t = scale_target(project)
    return refproof.check(t.definition, t.workloads, t.dir, t.generator_source(), f"{T}/definition.json", 60,
                          1 << 20, say=say, isolate=False)


def job_fast(project):
    from autogk_git.bench.job import make_job
    t = scale_target(project)
    return make_job(t, "quick", {}, t.workloads, {}, 0).get("fast_reference")


def test_a_proven_fast_reference_is_what_the_job_carries(project):
    (project / T / "reference.py").write_text(RIGHT)
    assert job_fast(project) is None, "carried before it was proven"
    said = []
    line = check(project, said.append)
    assert "proven equal to the definition's on all 5 workload(s)" in line, line
    assert said and "proving" in said[0]
    assert job_fast(project)["source"] == RIGHT


def test_a_wrong_fast_reference_is_refused_by_name_and_never_carried(project):
    (project / T / "reference.py").write_text(WRONG)
    line = check(project)
    assert line.startswith("warning: fast reference") and "disagrees" in line and "NOT used" in line, line
    assert "workload 00000000" in line and "elements outside" in line and "autogk bench" in line, line
    assert job_fast(project) is None


def test_a_fast_reference_proven_on_some_workloads_is_not_carried_for_the_others(project):
    from autogk_git.bench import refproof
    from autogk_git.bench.job import make_job
    (project / T / "reference.py").write_text(RIGHT)
    t = scale_target(project)
    small = min(t.workloads, key=lambda w: w["axes"]["n"])
    line = refproof.check(t.definition, t.workloads, t.dir, None, f"{T}/definition.json", 60, small["axes"]["n"] * 2 + 1,
                          isolate=False)
    assert "proven on 1 of 5 workload(s)" in line and "CPU size limit" in line, line
    assert make_job(t, "quick", {}, [small], {}, 0).get("fast_reference")
    assert make_job(t, "quick", {}, t.workloads, {}, 0).get("fast_reference") is None


def edit_definition_reference(project):
    p = project / T / "definition.json"
    d = json.loads(p.read_text())
    d["reference"] += "\n# a comment: the reference changed\n"
    p.write_text(json.dumps(d, indent=2))


def edit_workloads(project):
    p = project / T / "workloads.jsonl"
    p.write_text(p.read_text().replace('"n": 333', '"n": 334'))


def edit_generator(project):
    (project / T / "inputs.py").write_text("def generate(axes, definition, seed, device):\n    return {}\n")


def edit_fast(project):
    (project / T / "reference.py").write_text(RIGHT + "\n# a comment\n")


@pytest.mark.parametrize("edit", [edit_fast, edit_definition_reference, edit_workloads, edit_generator],
                         ids=["reference.py", "definition", "workloads", "inputs.py"])
def test_changing_a_file_the_proof_rests_on_proves_again(project, edit):
    (project / T / "reference.py").write_text(RIGHT)
    check(project)
    said = []
    check(project, said.append)
    assert not said, "proved again though nothing changed"
    edit(project)
    assert job_fast(project) is None, "the old proof was taken for the changed files"
    check(project, said.append)
    assert said and "proving" in said[0], said
    assert job_fast(project) is not None


def test_the_definitions_reference_made_wrong_is_caught_against_the_same_fast_reference(project):
    """The proof is symmetric: reference.py is unchanged, the definition's reference changes."""
    (project / T / "reference.py").write_text(RIGHT)
    check(project)
    p = project / T / "definition.json"
    d = json.loads(p.read_text())
    d["reference"] = d["reference"].replace("x * scale + bias", "x * scale + 2 * bias")
    p.write_text(json.dumps(d, indent=2))
    assert "disagrees" in check(project)
    assert job_fast(project) is None


# ------------------------------------------------------------------------------------------------
# Through the loop: the judge's reference, and reference.py read from the trunk.
# ------------------------------------------------------------------------------------------------

def commit_on_trunk(project, files: dict[str, str], subject: str) -> None:
    for rel, text in files.items():
        (project / rel).write_text(text)
    git(project, "add", "-A")
    git(project, "commit", "-qm", subject)


def experiment(project, subject: str, edits: dict[str, str], no_verify: bool = False) -> str:
    git(project, "checkout", "-qb", "autogk/scale/0001-" + subject.replace(" ", "-"))
    for rel, text in edits.items():
        (project / rel).write_text(text)
    git(project, "add", "-A")
    git(project, "commit", "-q", *(["--no-verify"] if no_verify else []), "-m", subject)
    return git(project, "rev-parse", "HEAD").strip()


def conclude(project) -> str:
    return autogk_in(project, "iterate", "-n", "0", "--agent", "tune", "--max-time", "0.001").stdout


def bench_json(project) -> tuple[dict, str]:
    out = autogk_in(project, "bench", "--json")
    return json.loads(out.stdout), out.stderr


def test_the_judge_uses_a_proven_fast_reference_and_says_so(project):
    commit_on_trunk(project, {f"{T}/reference.py": RIGHT}, "scale: a fast reference")
    res, said = bench_json(project)
    assert "fast reference" in said and "proven equal" in said, said
    assert res["correct"] and len(res["checked_workloads"]) == 5, res
    envs = [s["environment"] for s in res["stages"].values()]
    assert envs and all(e["reference"].startswith("reference.py (proven equal") for e in envs), envs


def test_a_planted_wrong_fast_reference_leaves_the_judge_on_the_definitions(project):
    """A wrong reference.py would fail every correct kernel (or pass a wrong one): it is refused, named
    with the workload, and the correct kernel is judged correct against the definition's reference."""
    commit_on_trunk(project, {f"{T}/reference.py": WRONG}, "scale: a wrong fast reference")
    res, said = bench_json(project)
    assert "disagrees with the definition's reference on workload 00000000" in said, said
    assert res["correct"] and len(res["checked_workloads"]) == 5, res
    assert all(s["environment"]["reference"] == "definition" for s in res["stages"].values())


@pytest.mark.parametrize("editable", [None, '["*.py"]'], ids=["default-editable", "editable-*.py"])
def test_an_experiment_that_changes_reference_py_is_invalid(project, editable):
    if editable:
        cfg = (project / ".autogk.toml").read_text()
        (project / ".autogk.toml").write_text(cfg.replace("[agent]\n", f"[agent]\neditable = {editable}\n", 1)
                                              if "[agent]\n" in cfg else cfg + f"\n[agent]\neditable = {editable}\n")
    commit_on_trunk(project, {f"{T}/reference.py": RIGHT}, "scale: a fast reference")
    trunk = git(project, "rev-parse", "main").strip()
    kernel = (project / T / "kernel.py").read_text()
    # The kernel drops the bias; the smuggled fast reference drops it too, so the two would agree.
    sha = experiment(project, "skip the bias", {f"{T}/kernel.py": kernel.replace("x * scale + b, mask", "x * scale, mask"),
                                                f"{T}/reference.py": WRONG}, no_verify=True)
    out = conclude(project)
    note = notes_json(project, sha)
    assert note["verdict"]["decision"] == "invalid", note["verdict"]
    assert note["offending_files"] == [f"{T}/reference.py"]
    assert git(project, "rev-parse", "main").strip() == trunk
    assert "#0001 reverted: archived" in out, out


def test_the_trunks_reference_py_judges_not_the_checkouts(project):
    """reference.py left uncommitted in the checkout is not the target's: the trunk has none."""
    kernel = (project / T / "kernel.py").read_text()
    git(project, "checkout", "-qb", "autogk/scale/0001-block-128")
    (project / T / "kernel.py").write_text(kernel.replace("BLOCK = 64 ", "BLOCK = 128 "))
    (project / T / "reference.py").write_text(RIGHT)  # never committed
    git(project, "commit", "-qm", "block 128", "--", f"{T}/kernel.py")
    sha = git(project, "rev-parse", "HEAD").strip()
    conclude(project)
    note = notes_json(project, sha)
    assert note["verdict"]["decision"] != "invalid", note["verdict"]
    assert all(s["environment"]["reference"] == "definition" for s in note["stages"].values())


def test_init_of_a_bundled_dsa_target_copies_and_proves_its_fast_reference(tmp_path):
    name = "dsa_topk_indexer_fp8_h64_d128_topk2048_ps64"
    out = autogk_in(tmp_path, "init", str(tmp_path / "demo"), "--example", name, "--no-check")
    text = out.stdout + out.stderr
    assert "fast reference" in text and "proven on" in text, text
    folder = tmp_path / "demo" / "kernels" / name
    assert (folder / "reference.py").read_text() == (EXAMPLES / name / "reference.py").read_text()
    tracked = subprocess.run(["git", "ls-files", f"kernels/{name}/reference.py"], cwd=tmp_path / "demo",
                             capture_output=True, text=True).stdout
    assert tracked.strip(), "reference.py is not committed with the target"


def test_doctor_checks_the_reference_but_leaves_the_proof_to_init_bench_and_iterate(project):
    """doctor said nothing of the proof and spent seconds making it: it runs the quick reference check
    (a broken reference is still a problem there) and proves nothing; `bench` proves it as before."""
    from autogk_git.bench.proofs import proof_dir
    (project / T / "reference.py").write_text(RIGHT)
    git(project, "add", "-A")
    git(project, "commit", "-qm", "a fast reference")
    assert not list(proof_dir().glob("*.json"))
    autogk_in(project, "doctor")
    assert not list(proof_dir().glob("*.json")), "doctor proved the fast reference"
    out = autogk_in(project, "bench")
    bench = out.stdout + out.stderr
    assert "proven equal to the definition's on all 5 workload(s)" in bench, bench
    assert list(proof_dir().glob("*.json"))
