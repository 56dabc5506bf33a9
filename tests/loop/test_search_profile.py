"""A DSA workload's Nsight Compute profile reaches the anthropic agents, and a research plan cites it.

The path is the loop's own: a real experiment of the bundled DSA sparse-attention target (the CPU
interpreter runs none of its workloads, so it is reverted unjudged), then loop/profile.after_verdict
profiles the trunk's kernel through bench/ncu.py, with an `ncu` on PATH that prints a recorded CSV
(tests/data/ncu/dsa_sparse_attention_details.csv: real `ncu --csv --page details` output from an H200,
ncu 2025.3.1, of the bundled kernel's two launches at num_tokens = 1, num_pages = 8462, taken by
benchmarks/results/session35_h200/call3.sh through the loop's own profile step) and is read by bench/ncu.py's parser into the result note, as
loop/step.py stores it. The only stand-in on the GPU side is the note's backend, set to `local` for the
profile step: on this CPU machine the kernel cannot run under ncu. The Claude side is the real SDK against
the stand-in Messages API server (tests/fake_messages_server.py).
"""
from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from conftest import DATA, autogk, autogk_in, git
from fake_messages_server import FakeMessages, finish, tool_use

DSA = "dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64"
CSV = DATA / "ncu" / "dsa_sparse_attention_details.csv"
LINE = ("_sparse_attend: 8.80 us; SM 1%; DRAM 0% (6 GB/s); occupancy 13% achieved / 12% theoretical; "
        "190 registers/thread; limiter: latency; ncu suggests LaunchConfiguration (est. 88%), TheoreticalOccupancy "
        "(est. 88%)")
KEY = "sk-ant-test-profile-0123456789"


def _fake_ncu(tmp: Path) -> Path:
    """An `ncu` that makes the report file and prints the recorded CSV on --import."""
    bindir = tmp / "bin"
    bindir.mkdir()
    script = bindir / "ncu"
    script.write_text(f"""#!/bin/sh
case "$1" in
  --version) echo "NVIDIA (R) Nsight Compute Command Line Profiler"; echo "Version 2025.3.1.0 (build 1) (public-release)";;
  --import) cat {CSV};;
  *) while [ "$#" -gt 0 ]; do if [ "$1" = "-o" ]; then touch "$2.ncu-rep"; fi; shift; done;;
esac
""")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return bindir


@pytest.fixture(scope="module")
def dsa_profiled(tmp_path_factory):
    """A DSA project whose one experiment's note carries the trunk kernel's profile, as the loop stores it
    (built once for this file: the DSA reference's first check alone takes ~20 s of CPU here)."""
    from autogk_git.loop import profile
    from autogk_git.project import Project
    from autogk_git.record import summaries
    from autogk_git.record.experiments import results

    tmp = tmp_path_factory.mktemp("dsa-profiled")
    with pytest.MonkeyPatch.context() as mp:
        hermetic_env(mp, tmp)
        root = tmp / "dsa"
        root.mkdir()
        git(root, "init", "-q", "-b", "main")
        autogk(tmp, "init", str(root), "--example", DSA, "--no-check", "--here")
        # Every DSA workload is over this size limit: the experiment is real, and reverted unjudged in seconds.
        autogk_in(root, "iterate", "-n", "1", "--agent", "tune", "--backend", "interpret", "--json",
                  env={"AUTOGK_BENCH_CPU_MAX_NUMEL": "1", "AUTOGK_RESEARCH_WALL": "0"})
        mp.setenv("PATH", f"{_fake_ncu(tmp)}{os.pathsep}{os.environ['PATH']}")
        project = Project(root)
        (result,) = results(project, DSA)
        said: list[str] = []
        taken = dict(result, backend="local")
        assert profile.after_verdict(project, DSA, taken, said.append)
        result["profile"] = taken["profile"]
        summaries.write_result(project.root, result)  # as loop/step.py does after a profile
        assert "profiling the trunk kernel with ncu on 2 workload(s)" in said[0]
    return root


def hermetic_env(mp: pytest.MonkeyPatch, tmp: Path) -> None:
    """conftest's hermetic set-up, for a fixture wider than one test (that one is per test)."""
    gitconfig = tmp / ".gitconfig"
    gitconfig.write_text("[user]\n\tname = Test Person\n\temail = test@example.com\n[init]\n\tdefaultBranch = main\n")
    mp.setenv("HOME", str(tmp))
    mp.setenv("GIT_CONFIG_GLOBAL", str(gitconfig))
    mp.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for k in list(os.environ):
        if k.startswith(("AUTOGK_", "ANTHROPIC_", "MODAL_", "GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX")):
            mp.delenv(k, raising=False)
    mp.setenv("AUTOGK_BENCH_HOOK_MODE", "foreground")
    mp.setenv("AUTOGK_TRACKING_ENABLED", "0")


@pytest.fixture
def profiled(dsa_profiled, tmp_path, monkeypatch):
    """A copy of the profiled DSA project for one test (a plan note or a kernel edit stays there)."""
    import shutil
    from autogk_git.git import hooks
    from autogk_git.record import refs
    monkeypatch.setenv("AUTOGK_TRACKING_ENABLED", "0")
    dst = tmp_path / "dsa"
    shutil.copytree(dsa_profiled, dst, symlinks=True)
    hooks.install(dst, refs.NOTES_GLOB)
    return dst


def test_a_research_plan_cites_the_dsa_profile_it_was_given(profiled, monkeypatch):
    from autogk_git.project import Project
    from autogk_git.record.experiments import results

    (res,) = results(Project(profiled), DSA)
    prof = res["profile"]
    assert prof["tool"] == "ncu" and prof["ncu_version"] == "2025.3.1.0"
    assert [k["name"] for k in prof["workloads"][0]["kernels"]] == ["_sparse_attend", "_merge_splits"]

    def cite(body):
        """The fake model's plan quotes the profile line it was sent by the read_artifact tool."""
        got = body["messages"][-1]["content"][0]["content"]
        quoted = next(ln.strip() for ln in got.splitlines() if ln.strip().startswith("_sparse_attend:"))
        return tool_use("write_plan", {
            "diagnosis": f"Latency-bound, per the ncu profile: {quoted}",
            "strategy": "Fill the GPU: more programs per token at small batch.",
            "actions": ["raise TARGET_PROGRAMS to 528"], "avoid": ["BLOCK_N 128"]})

    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    steps = [lambda body: tool_use("read_artifact", {"name": "profile"}), cite]
    with FakeMessages(lambda body: steps.pop(0)(body)) as srv:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", srv.url)
        plan = json.loads(autogk_in(profiled, "research", "--json").stdout)
    first = srv.requests[0]["messages"][0]["content"]
    first = first if isinstance(first, str) else first[0]["text"]
    assert "Nsight Compute profile of the trunk's kernel" in first and LINE in first
    (tool,) = srv.tool_results(1)
    assert tool["is_error"] is False and LINE in tool["content"]
    assert "num_tokens=8, num_pages=8462" in tool["content"]  # the workload, named by its axes
    note = git(profiled, "notes", "--ref", "autogk/plans", "show", plan["commit"])
    assert f"Latency-bound, per the ncu profile: {LINE}" in note  # the model's citation, as written
    # autogk's own section: the figures the plan was written from, whatever the model quoted
    assert "## Profile the plan was written from" in note
    section = note.split("## Profile the plan was written from", 1)[1]
    assert LINE in section and "_merge_splits: 7.01 us" in section


def test_the_experiment_agent_reads_the_profile_through_its_tool(profiled, monkeypatch):
    from autogk_git.agents.anthropic_agent import AnthropicAgent
    from autogk_git.agents.base import Context
    from autogk_git.project import Project
    from autogk_git.record.experiments import results

    project = Project(profiled)
    kernel = f"kernels/{DSA}/kernel.py"
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    script = [tool_use("read_artifact", {"name": "profile"}),
              tool_use("edit_file", {"path": kernel, "old": "TARGET_PROGRAMS = 264 ", "new": "TARGET_PROGRAMS = 528 "}),
              finish("TARGET_PROGRAMS 264 -> 528: the profile shows 6% occupancy")]
    with FakeMessages(script) as srv:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", srv.url)
        ctx = Context(worktree=profiled, target=project.target(DSA), number=2, history=results(project, DSA),
                      config=project.config)
        prop = AnthropicAgent(ctx.config).propose(ctx)
    (tool,) = srv.tool_results(1)
    assert tool["is_error"] is False, tool["content"]
    assert LINE in tool["content"] and "_merge_splits: 7.01 us" in tool["content"]
    assert prop.changed and "6% occupancy" in prop.hypothesis


def test_without_a_profile_the_tool_says_why_and_how_to_get_one(monkeypatch):
    import shutil

    from autogk_git import config as config_mod
    from autogk_git.agents import tools
    keep = [d for d in os.environ["PATH"].split(os.pathsep) if d and not shutil.which("ncu", path=d)]
    monkeypatch.setenv("PATH", os.pathsep.join(keep))
    with pytest.raises(tools.ToolError, match=r"no profile: ncu not found; autogk takes one with --backend local"):
        tools.profile_text([], config_mod.parse({}, environ={}))


def test_a_plan_has_a_profile_section_only_when_there_is_a_profile():
    from autogk_git.agents import research
    meta = {"target": DSA, "after": 3, "trigger": "demand", "agent": "offline"}
    sections = {"diagnosis": "d", "strategy": "s", "actions": ["a"], "avoid": ["v"]}
    bare = research.render(sections, meta, ["no profile: ncu not found", ""])
    assert "## Profile" not in bare  # every view says "no profile" once already; a plan would say it twice
    shown = research.render(sections, meta, ["Nsight Compute profile of x:", f"  {LINE}", ""])
    assert f"## Profile the plan was written from\n\nNsight Compute profile of x:\n  {LINE}\n" in shown
    assert research.parse_plan("c" * 40, shown).after == 3  # the plan's mark stays its last line
