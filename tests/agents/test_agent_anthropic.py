"""The anthropic agent against a stand-in Messages API server: real HTTP through the real SDK."""
from __future__ import annotations

import json
import os
import subprocess

import pytest

from conftest import autogk_in, git, notes_json
from fake_messages_server import FakeMessages, _ids, delay, error, finish, message, text, tool_use

from autogk_git.agents.anthropic_agent import AnthropicAgent
from autogk_git.agents.base import AgentStopped, Context
from autogk_git.errors import AgentError
from autogk_git.project import Project

KEY = "sk-ant-test-SECRET-0123456789"
KERNEL = "kernels/scale/kernel.py"


@pytest.fixture
def api(monkeypatch):
    """Point the SDK at a fake server built from a script; returns a factory."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("AUTOGK_AGENT_RETRY_MAX_S", "0.05")
    servers = []

    def start(script):
        srv = FakeMessages(script).__enter__()
        servers.append(srv)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", srv.url)
        return srv

    yield start
    for s in servers:
        s.__exit__(None)


def context(root, history=None, **kw) -> Context:
    project = Project(root)
    return Context(worktree=root, target=project.target("scale"), number=7, history=history or [],
                   config=project.config, **kw)


def propose(root, **kw):
    ctx = context(root, **kw)
    return AnthropicAgent(ctx.config).propose(ctx), ctx


def test_a_scripted_conversation_makes_one_change_and_prices_it(project, api):
    srv = api([
        tool_use("read_file", {"path": KERNEL}, input_tokens=2000, output_tokens=50),
        tool_use("history", {}, input_tokens=3000, output_tokens=40),
        tool_use("edit_file", {"path": KERNEL, "old": "BLOCK = 64 ", "new": "BLOCK = 128 "},
                 input_tokens=4000, output_tokens=60, cache_read_input_tokens=1000),
        finish("BLOCK 64 -> 128: fewer programs", "Fewer, larger programs halve launch overhead.",
               input_tokens=5000, output_tokens=30),
    ])
    prop, ctx = propose(project, history=[{"experiment": 3, "hypothesis": "tune: MASK True -> False",
                                           "verdict": {"decision": "revert", "reason": "INCORRECT_NUMERICAL tail"}}],
                        plan="## Actions\n1. try BLOCK 128 first", plan_id="a" * 40)
    assert prop.changed and prop.hypothesis == "BLOCK 64 -> 128: fewer programs"
    assert "halve launch overhead" in prop.rationale
    assert "BLOCK = 128  # autogk: tune" in (project / KERNEL).read_text()
    # The model saw the kernel and the history through real tool_result blocks.
    assert "_scale_kernel" in srv.tool_results(1)[0]["content"]
    assert "MASK True -> False" in srv.tool_results(2)[0]["content"]
    assert srv.tool_results(3)[0]["is_error"] is False
    # The rules and the target's program travel in the system prompt; the lesson in the first message.
    system = srv.requests[0]["system"][0]["text"]
    assert "ONE change per experiment" in system and "Stay in Triton" in system and "gaming" in system
    first = srv.requests[0]["messages"][0]["content"][0]["text"]
    assert "was reverted" in first and "try BLOCK 128 first" in first and "def run(" in first
    assert "research plan on aaaaaaaaaa" in prop.rationale
    assert srv.requests[0]["model"] == "claude-sonnet-5-5"
    assert KEY in (srv.headers[0].get("x-api-key") or srv.headers[0].get("authorization", ""))
    # Usage: summed per request, priced from the table (sonnet 5.5: $2 in, $10 out, $0.20 cache read).
    u = prop.usage
    assert (u["input_tokens"], u["output_tokens"], u["cache_read_input_tokens"]) == (14000, 180, 1000)
    assert u["requests"] == 4 and u["turns"] == 4 and len(u["per_request"]) == 4
    assert u["cost_usd"] == pytest.approx((14000 * 2 + 180 * 10 + 1000 * 0.2) / 1e6)
    assert KEY not in json.dumps(prop.usage) + prop.rationale + prop.hypothesis


def test_price_table_comes_from_config(project, api, monkeypatch):
    monkeypatch.setenv("AUTOGK_AGENT_MODEL", "my-model-2")
    monkeypatch.setenv("AUTOGK_AGENT_PRICES", '{"my-model-2": [10, 100]}')
    monkeypatch.setenv("AUTOGK_AGENT_MAX_TOKENS", "0")
    api([tool_use("edit_file", {"path": KERNEL, "old": "BLOCK = 64 ", "new": "BLOCK = 32 "},
                  input_tokens=1_000_000, output_tokens=0),
         finish("BLOCK 32", input_tokens=0, output_tokens=10_000)])
    prop, _ = propose(project)
    assert prop.usage["model"] == "my-model-2" and prop.usage["priced"] is True
    assert prop.usage["cost_usd"] == pytest.approx(10 + 1.0)


def test_transient_errors_are_retried_with_backoff(project, api):
    srv = api([error(429), error(529), error(500),
               tool_use("edit_file", {"path": KERNEL, "old": "BLOCK = 64 ", "new": "BLOCK = 32 "}),
               error(529, retry_after=None), finish("BLOCK 32")])
    prop, _ = propose(project)
    assert prop.changed and len(srv.requests) == 6
    assert prop.usage["retries"] == 4 and prop.usage["requests"] == 2


def test_retries_are_bounded(project, api, monkeypatch):
    monkeypatch.setenv("AUTOGK_AGENT_RETRIES", "2")
    srv = api([error(529), error(529), error(529), finish("never reached")])
    with pytest.raises(AgentStopped, match="kept failing.*after 2 retries"):
        propose(project)
    assert len(srv.requests) == 3


def test_a_timeout_is_retried(project, api, monkeypatch):
    monkeypatch.setenv("AUTOGK_AGENT_TIMEOUT_S", "0.5")
    srv = api([delay(2.0, text("too late")),
               tool_use("edit_file", {"path": KERNEL, "old": "BLOCK = 64 ", "new": "BLOCK = 32 "}),
               finish("BLOCK 32")])
    prop, _ = propose(project)
    assert prop.changed and prop.usage["retries"] == 1 and len(srv.requests) == 3


def test_a_client_error_is_not_retried_and_says_what_to_do(project, api):
    srv = api([error(401, None)])
    with pytest.raises(AgentError) as e:
        propose(project)
    assert "AuthenticationError" in e.value.message and "ANTHROPIC_API_KEY" in e.value.hint
    assert len(srv.requests) == 1


def test_malformed_tool_input_comes_back_as_a_tool_error(project, api):
    srv = api([tool_use("read_file", {}),                             # missing path
               tool_use("edit_file", {"path": 42, "old": 1, "new": None}),
               tool_use("no_such_tool", {"x": 1}),
               tool_use("read_file", "not an object"),
               tool_use("edit_file", {"path": KERNEL, "old": "not in the file", "new": "x"}),
               finish(""),                                            # empty hypothesis
               finish("nothing changed yet"),                         # no change made
               tool_use("edit_file", {"path": KERNEL, "old": "BLOCK = 64 ", "new": "BLOCK = 32 "}),
               finish("BLOCK 32")])
    prop, _ = propose(project)
    assert prop.changed and prop.hypothesis == "BLOCK 32"
    errs = [srv.tool_results(i)[0] for i in range(1, 8)]
    assert all(r["is_error"] for r in errs)
    assert "'path' must be a non-empty string" in errs[0]["content"]
    assert "unknown tool 'no_such_tool'" in errs[2]["content"]
    assert "JSON object" in errs[3]["content"]
    assert "occurs 0 times" in errs[4]["content"]
    assert "no editable file has changed" in errs[6]["content"]


def test_writes_outside_the_sandbox_are_refused(project, api, tmp_path):
    outside = tmp_path / "outside.py"
    outside.write_text("original\n")
    (project / "kernels/scale/link.py").symlink_to(outside)
    before = {p: (project / p).read_text() for p in ("kernels/scale/definition.json", ".autogk.toml")}
    attempts = [{"path": "../outside.py", "content": "x"},
                {"path": str(outside), "content": "x"},
                {"path": "kernels/scale/../../.autogk.toml", "content": "x"},
                {"path": "kernels/scale/definition.json", "content": "x"},
                {"path": ".autogk.toml", "content": "x"},
                {"path": ".git/config", "content": "x"}]
    srv = api([tool_use("write_file", a) for a in attempts] +
              [tool_use("read_file", {"path": "kernels/scale/link.py"}),
               tool_use("read_file", {"path": "/etc/passwd"}),
               tool_use("edit_file", {"path": KERNEL, "old": "BLOCK = 64 ", "new": "BLOCK = 32 "}),
               finish("BLOCK 32")])
    monkey_editable = os.environ.get("AUTOGK_AGENT_EDITABLE")
    assert monkey_editable is None
    prop, _ = propose(project)
    results = [srv.tool_results(i)[0] for i in range(1, len(attempts) + 3)]
    assert all(r["is_error"] for r in results), results
    assert "not allowed" in results[0]["content"] and "not editable" in results[3]["content"]
    assert "outside the checkout" in results[len(attempts)]["content"]
    assert outside.read_text() == "original\n"
    assert before == {p: (project / p).read_text() for p in before}
    assert prop.changed


def test_symlinked_editable_file_pointing_out_is_refused(project, api, monkeypatch, tmp_path):
    outside = tmp_path / "victim.py"
    outside.write_text("victim\n")
    monkeypatch.setenv("AUTOGK_AGENT_EDITABLE", "kernel.py,helpers.py")
    (project / "kernels/scale/helpers.py").symlink_to(outside)
    srv = api([tool_use("write_file", {"path": "kernels/scale/helpers.py", "content": "pwned"}),
               tool_use("edit_file", {"path": KERNEL, "old": "BLOCK = 64 ", "new": "BLOCK = 32 "}),
               finish("BLOCK 32")])
    propose(project)
    assert srv.tool_results(1)[0]["is_error"] and outside.read_text() == "victim\n"


def test_an_agent_that_never_stops_hits_the_turn_budget(project, api, monkeypatch):
    monkeypatch.setenv("AUTOGK_AGENT_MAX_TURNS", "4")
    srv = api(lambda body: tool_use("list_files", {}))
    with pytest.raises(AgentStopped, match="turn budget spent: 4") as e:
        propose(project)
    assert len(srv.requests) == 4
    assert e.value.usage["requests"] == 4 and e.value.usage["cost_usd"] > 0


def test_the_token_budget_stops_a_long_conversation(project, api, monkeypatch):
    monkeypatch.setenv("AUTOGK_AGENT_MAX_TOKENS", "5000")
    srv = api(lambda body: tool_use("list_files", {}, input_tokens=2000, output_tokens=100))
    with pytest.raises(AgentStopped, match="token budget spent"):
        propose(project)
    assert len(srv.requests) == 3


def test_a_model_that_only_talks_is_nudged_to_use_tools(project, api):
    srv = api([text("I think BLOCK should be 32."),
               tool_use("edit_file", {"path": KERNEL, "old": "BLOCK = 64 ", "new": "BLOCK = 32 "}),
               finish("BLOCK 32")])
    prop, _ = propose(project)
    assert prop.changed
    nudge = srv.requests[1]["messages"][-1]["content"][0]["text"]
    assert "call finish" in nudge


def test_an_agent_out_of_turns_stops_the_loop_and_says_why(project, api, monkeypatch):
    monkeypatch.setenv("AUTOGK_AGENT_MAX_TURNS", "2")
    api(lambda body: tool_use("history", {}))
    out = autogk_in(project, "iterate", "-n", "3", "--agent", "anthropic", "--json", check=False,
                 env={"AUTOGK_TRACKING_ENABLED": "false"})
    assert out.returncode == 1
    report = json.loads(out.stdout)
    assert report["failed"] and "turn budget spent: 2" in report["stop_reason"]
    assert report["experiments"] == [] and report["usage"]["requests"] == 2
    assert git(project, "branch", "--list", "autogk/*").strip() == ""
    assert git(project, "status", "--porcelain").strip() == ""


def test_docs_globs_are_readable_but_never_writable(project, api, monkeypatch):
    monkeypatch.setenv("AUTOGK_AGENT_DOCS", "*.toml")
    srv = api([tool_use("read_file", {"path": ".autogk.toml"}),
               tool_use("write_file", {"path": ".autogk.toml", "content": "x"}),
               tool_use("read_file", {"path": "tests/x.py"}),
               tool_use("edit_file", {"path": KERNEL, "old": "BLOCK = 64 ", "new": "BLOCK = 32 "}),
               finish("BLOCK 32")])
    propose(project)
    ok, write, other = (srv.tool_results(i)[0] for i in (1, 2, 3))
    assert not ok["is_error"] and "[project]" in ok["content"]
    assert write["is_error"] and "not editable" in write["content"]
    assert other["is_error"] and "not readable" in other["content"]


def test_without_a_key_the_agent_says_how_to_get_one(project, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(AgentError) as e:
        propose(project)
    assert "ANTHROPIC_API_KEY is not set" in e.value.message and "--agent tune" in e.value.hint


def test_auto_stays_offline_without_a_key(project):
    from autogk_git.agents import resolve_kind
    assert resolve_kind("auto") == "tune"


def test_iterate_with_the_anthropic_agent_records_cost_in_notes_and_mlflow(project, api):
    import sqlite3

    srv = api([
        tool_use("read_artifact", {"name": "workloads"}),
        tool_use("edit_file", {"path": KERNEL, "old": "mask = offs < n\n", "new": "mask = offs < n - 1\n"}),
        tool_use("run_check", {}),
        tool_use("edit_file", {"path": KERNEL, "old": "mask = offs < n - 1\n", "new": "mask = offs < n\n"}),
        tool_use("edit_file", {"path": KERNEL, "old": "BLOCK = 64 ", "new": "BLOCK = 32 "}),
        finish("BLOCK 64 -> 32", "Smaller blocks for the small workloads.", input_tokens=20000, output_tokens=500),
        # research on demand, afterwards: a model-written plan
        tool_use("history", {}),
        tool_use("write_plan", {"diagnosis": "d", "strategy": "Vectorize the loads.", "actions": ["a1", "a2"],
                                "avoid": ["MASK False"]}),
    ])
    out = autogk_in(project, "iterate", "-n", "1", "--agent", "anthropic", "--budget-usd", "5", "--json")
    report = json.loads(out.stdout)
    [exp] = report["experiments"]
    assert exp["decision"] == "keep" and exp["hypothesis"] == "BLOCK 64 -> 32"
    # The model saw the inspector's report and the failing quick check of its broken intermediate edit.
    assert "Axis n: 50 .. 4096" in srv.tool_results(1)[0]["content"]
    check = json.loads(srv.tool_results(3)[0]["content"])
    assert check["correct"] is False and "INCORRECT" in json.dumps(check["workloads"])
    note = notes_json(project, exp["commit"])
    cost = note["cost"]
    assert cost["requests"] == 6 and cost["input_tokens"] == 5 * 1000 + 20000 and cost["turns"] == 6
    assert cost["cost_usd"] == pytest.approx((25000 * 2 + 1000 * 10) / 1e6)
    assert report["cost_usd"] == pytest.approx(cost["cost_usd"])
    assert report["usage"]["tokens"] == cost["tokens"]
    db = project / "mlruns" / "mlflow.db"
    with sqlite3.connect(db) as con:
        rows = dict(con.execute("select key, value from metrics where key like 'cost.%'").fetchall())
    assert rows["cost.cost_usd"] == pytest.approx(cost["cost_usd"]) and rows["cost.output_tokens"] == 1000
    # The loop run's totals: a run in autogk/scale/loops.
    with sqlite3.connect(db) as con:
        loop = dict(con.execute("select m.key, m.value from metrics m join runs r on m.run_uuid = r.run_uuid "
                                "join experiments e on r.experiment_id = e.experiment_id "
                                "where e.name = 'autogk/scale/loops'").fetchall())
    assert loop["cost_usd"] == pytest.approx(cost["cost_usd"]) and loop["kept"] == 1 and loop["requests"] == 6
    assert loop["time_bench_s"] == pytest.approx(report["phases"]["bench_s"]) and loop["time_bench_s"] > 0  # its time
    assert loop["time_benchmarks"] == 1 and loop["time_open_s"] > 0

    out = autogk_in(project, "research", "--json")
    plan = json.loads(out.stdout)
    assert plan["usage"]["requests"] == 2 and plan["meta"]["cost_usd"] > 0
    assert "Vectorize the loads." in plan["text"] and "anthropic (claude-sonnet-5-5)" in plan["text"]
    # The research agent had only read-only tools.
    names = {t["name"] for t in srv.requests[-1]["tools"]}
    assert not names & {"write_file", "edit_file", "run_check"}

    # The key is nowhere: not in notes, commit messages, MLflow's store or artifacts.
    everything = git(project, "log", "--all", "-p", "--format=%B") + \
        git(project, "log", "-p", "refs/notes/autogk/results") + git(project, "log", "-p", "refs/notes/autogk/plans")
    assert KEY not in everything and KEY not in out.stdout + out.stderr
    for f in (project / "mlruns").rglob("*"):
        if f.is_file():
            assert KEY.encode() not in f.read_bytes(), f


def test_a_budget_needs_a_priced_model(project, api, monkeypatch):
    api([])
    monkeypatch.setenv("AUTOGK_AGENT_MODEL", "claude-unknown-9")
    out = autogk_in(project, "iterate", "-n", "1", "--agent", "anthropic", "--budget-usd", "1", check=False)
    assert out.returncode == 1
    assert "needs a price for claude-unknown-9" in out.stderr and "[agent] prices" in out.stderr


def test_the_sdk_loads_only_when_an_llm_agent_runs():
    import subprocess
    import sys
    code = ("import sys, autogk_git.cli, autogk_git.loop.iterate, autogk_git.agents.research, "
            "autogk_git.agents.anthropic_agent, autogk_git.agents.command\n"
            "print('anthropic' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_the_stand_in_server_rejects_what_the_real_api_rejects():
    from fake_messages_server import validate
    tu = {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "x", "input": {}}]}
    ok = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}, tu,
                                                       {"role": "user", "content": [
                                                           {"type": "tool_result", "tool_use_id": "t1", "content": "r"}]}]}
    assert validate(ok) is None
    missing = dict(ok, messages=ok["messages"][:2] + [{"role": "user", "content": [{"type": "text", "text": "?"}]}])
    assert "tool_result" in validate(missing)
    cached = [{"type": "text", "text": "a", "cache_control": {"type": "ephemeral"}}] * 5
    assert "cache_control" in validate(dict(ok, system=cached))


def test_the_parallel_loop_asks_for_each_slots_change_at_once(small_project, api, monkeypatch):
    # An LLM's proposal takes seconds to minutes: asked one at a time, K slots would wait for each other's
    # conversations. Each conversation has its own worktree, so the loop asks for all its slots at once.
    import re
    import time
    monkeypatch.setenv("AUTOGK_TRACKING_ENABLED", "false")
    monkeypatch.setenv("AUTOGK_BENCH_BACKEND", "interpret")
    edits, asked = {1: "BLOCK = 128 ", 2: "BLOCK = 32 "}, {}

    def script(body):
        first = body["messages"][0]["content"]
        words = first if isinstance(first, str) else " ".join(b.get("text", "") for b in first if isinstance(b, dict))
        n = int(re.search(r"Experiment (\d{4})", words).group(1))
        if len(body["messages"]) == 1:  # the conversation's first turn: answered after 3 s
            asked[n] = time.monotonic()
            return delay(3.0, tool_use("edit_file", {"path": KERNEL, "old": "BLOCK = 64 ", "new": edits[n]}))
        return finish(f"BLOCK 64 -> {edits[n].split()[-1]}", "another block size")
    api(script)
    report = json.loads(autogk_in(small_project, "iterate", "-n", "2", "--parallel", "2", "--agent", "anthropic",
                                  "--json").stdout)
    exps = sorted(report["experiments"], key=lambda e: e["number"])
    assert [(e["number"], e["hypothesis"]) for e in exps] == [(1, "BLOCK 64 -> 128"), (2, "BLOCK 64 -> 32")]
    assert abs(asked[1] - asked[2]) < 2.5, asked  # both asked before either answered
    assert all(e["phases"]["open_s"] >= 3.0 and e["phases"]["proposed_beside"] for e in exps)
    assert git(small_project, "branch", "--list", "autogk/*").strip() == ""  # both concluded, nothing left open


# ------------------------------------------------------------------------------------------------
# What one model response may hold (red-team runs, 2026-12-06: each of these ended or stalled the loop)
# ------------------------------------------------------------------------------------------------

def calls(*uses) -> dict:
    """One response holding several tool calls."""
    return message([{"type": "tool_use", "id": f"toolu_many_{next(_ids):05d}", "name": n, "input": i}
                    for n, i in uses])


def test_finish_ends_the_response_and_its_text_is_made_printable(project, api):
    # [edit, finish, undo the edit] in one response: the undo ran after finish was accepted and the loop
    # stopped on "the agent made no change"; a NUL in the hypothesis stopped `git commit`.
    api([calls(("edit_file", {"path": KERNEL, "old": "BLOCK = 64 ", "new": "BLOCK = 32 "}),
               ("finish", {"hypothesis": "BLOCK\x00 32 \x1b]0;title\x07", "rationale": "why\x00 not\n- fewer"}),
               ("edit_file", {"path": KERNEL, "old": "BLOCK = 32 ", "new": "BLOCK = 64 "}))])
    prop, _ = propose(project)
    assert prop.changed and "BLOCK = 32 " in (project / KERNEL).read_text()
    assert prop.hypothesis.startswith("BLOCK 32") and not any(c in prop.hypothesis for c in "\x00\x1b\x07")
    assert "\x00" not in prop.rationale and "why not\n- fewer" in prop.rationale


def test_a_response_of_too_many_calls_is_refused_and_odd_inputs_are_tool_errors(project, api):
    big = project / "kernels" / "scale" / "blob" / "big.safetensors"
    big.parent.mkdir()
    with open(big, "wb") as f:
        f.truncate(200 * 2 ** 20)  # sparse: read whole, it was 200 MB of memory
    srv = api([calls(*[("list_files", {})] * 200),
               tool_use("history", {"last": 10 ** 400}),
               tool_use("read_file", {"path": "kernels/scale/blob/big.safetensors"}),
               tool_use("write_file", {"path": KERNEL, "content": "# " + "x" * 300_000 + "\n"}),
               tool_use("edit_file", {"path": KERNEL, "old": "BLOCK = 64 ", "new": "BLOCK = 32 "}),
               finish("BLOCK 32")])
    prop, _ = propose(project)
    assert prop.changed and prop.hypothesis == "BLOCK 32"
    refused = srv.tool_results(1)
    assert len(refused) == 200 and all(r["is_error"] and "at most 64" in r["content"] for r in refused)
    assert not srv.tool_results(2)[0]["is_error"]
    from autogk_git.agents import tools
    assert tools.history_rows([{"experiment": 1}], float("inf")) == tools.history_rows([{"experiment": 1}])  # 1e999
    assert "binary file" in srv.tool_results(3)[0]["content"]
    assert srv.tool_results(4)[0]["is_error"] and "at most" in srv.tool_results(4)[0]["content"]
