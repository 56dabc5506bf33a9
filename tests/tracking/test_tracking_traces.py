"""The agent's conversation as MLflow traces, against a real SQLite store and the stand-in Messages API:
spans per model call and tool call, written while the agent runs, linked to the experiment's run, with
no secret in them; a run's Duration is its benchmark's time."""
from __future__ import annotations

import json

import pytest

from conftest import autogk_in, notes_json, without_store
from fake_messages_server import FakeMessages, finish, text, tool_use

from autogk_git.agents.anthropic_agent import AnthropicAgent
from autogk_git.agents.base import Context
from autogk_git.project import Project

KEY = "sk-ant-test-SECRET-7f3a9c1e5b"
OTHER = "hunter2-the-service-token"      # a second secret, known only by its variable's name
KERNEL = "kernels/scale/kernel.py"


@pytest.fixture
def api(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("MY_SERVICE_TOKEN", OTHER)
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


def client_of(root):
    from mlflow import MlflowClient
    return MlflowClient(tracking_uri=Project(root).tracking_uri())


def traces_of(root, target="scale"):
    c = client_of(root)
    exp = c.get_experiment_by_name(f"autogk/{target}")
    assert exp is not None, "no MLflow experiment for the target"
    return c, exp.experiment_id, c.search_traces(locations=[exp.experiment_id], max_results=50)


def propose(root, number=7):
    project = Project(root)
    ctx = Context(worktree=root, target=project.target("scale"), number=number, history=[], config=project.config)
    return AnthropicAgent(ctx.config).propose(ctx)


def test_each_model_call_and_tool_call_is_a_span_and_they_appear_while_the_agent_runs(project, api):
    seen = {}

    def script(body):
        n = len(seen.setdefault("calls", []))
        seen["calls"].append(1)
        if n == 2:  # the third request: the conversation is still running; what does MLflow show now?
            _, _, traces = traces_of(project)
            seen["live"] = [(t.info.state, sorted(s.name for s in t.data.spans)) for t in traces]
        steps = [tool_use("read_file", {"path": KERNEL}),
                 tool_use("edit_file", {"path": KERNEL, "old": "BLOCK = 64 ", "new": "BLOCK = 128 "}),
                 text("thinking out loud"),
                 finish("BLOCK 64 -> 128", "fewer programs")]
        return steps[n]

    api(script)
    prop = propose(project)
    assert prop.changed and prop.usage["trace_id"].startswith("tr-")
    # Live: two model calls and the read_file tool had been written before the conversation ended.
    [(state, names)] = seen["live"]
    assert state == "IN_PROGRESS", state
    assert {"model call 1", "model call 2", "tool read_file", "tool edit_file"} <= set(names), names

    c, _, traces = traces_of(project)
    [t] = traces
    assert t.info.trace_id == prop.usage["trace_id"] and t.info.state == "OK"
    assert t.info.tags["autogk.number"] == "0007" and t.info.tags["autogk.target"] == "scale"
    spans = {s.name: s for s in t.data.spans}
    root = spans["#0007 anthropic agent"]
    assert root.span_type == "AGENT" and root.parent_id is None
    assert "ONE change per experiment" in root.inputs["system"]
    assert root.outputs["finish"]["hypothesis"] == "BLOCK 64 -> 128"
    calls = [s for s in t.data.spans if s.span_type == "CHAT_MODEL"]
    assert [s.name for s in sorted(calls, key=lambda s: s.start_time_ns)] == [f"model call {i}" for i in range(1, 5)]
    assert all(s.parent_id == root.span_id for s in calls)
    assert spans["model call 3"].outputs["content"] == [{"type": "text", "text": "thinking out loud"}]
    assert spans["model call 1"].attributes["usage.in"] == 1000
    read = spans["tool read_file"]
    assert read.span_type == "TOOL" and read.inputs == {"path": KERNEL} and "_scale_kernel" in read.outputs
    # The second model call was sent the kernel as a tool result: that is what its span holds as input.
    sent = spans["model call 2"].inputs["messages"][0]["content"][0]
    assert sent["type"] == "tool_result" and "_scale_kernel" in sent["content"]


def test_no_secret_reaches_a_trace_or_the_store(project, api):
    # The model is made to repeat both secrets (a model may echo what a tool showed it): the trace has *** instead.
    (project / "kernels/scale/program.md").write_text(f"notes; the token is {OTHER}\n")
    api([tool_use("read_file", {"path": "kernels/scale/program.md"}, text=f"my key is {KEY}"),
         tool_use("edit_file", {"path": KERNEL, "old": "BLOCK = 64 ", "new": "BLOCK = 128 "}),
         finish(f"BLOCK 64 -> 128 ({OTHER})", f"rationale {KEY}")])
    prop = propose(project)
    assert prop.changed
    _, _, [t] = traces_of(project)
    dump = json.dumps(t.to_dict())
    assert "***" in dump and "my key is ***" in dump
    assert KEY not in dump and OTHER not in dump
    # Nowhere in the store's files either: the database (spans, tags, metadata) and every artifact.
    for f in (project / "mlruns").rglob("*"):
        if f.is_file():
            data = f.read_bytes()
            assert KEY.encode() not in data and OTHER.encode() not in data, f"a secret in {f}"


def test_the_trace_is_linked_to_the_experiments_run_and_its_duration_is_the_benchmarks(project, api, monkeypatch):
    api([tool_use("edit_file", {"path": KERNEL, "old": "BLOCK = 64 ", "new": "BLOCK = 32 "}),
         finish("BLOCK 64 -> 32", "smaller blocks")])
    report = json.loads(autogk_in(project, "iterate", "-n", "1", "--agent", "anthropic", "--json").stdout)
    [exp] = report["experiments"]
    note = notes_json(project, exp["commit"])
    c, exp_id, _ = traces_of(project)
    [run] = c.search_runs([exp_id], filter_string=f"tags.`autogk.commit` = '{exp['commit']}'")
    # Duration (end - start) is the benchmark's wall time from the note, not the moment of logging.
    wall_ms = note["cost"]["bench_wall_s"] * 1000
    assert wall_ms > 500
    assert abs((run.info.end_time - run.info.start_time) - wall_ms) < 5, (run.info.start_time, run.info.end_time)
    # The run's Traces tab shows the conversation, which is tagged with what it became.
    tid = note["cost"]["trace_id"]
    linked = c.search_traces(locations=[exp_id], run_id=run.info.run_id)
    assert [t.info.trace_id for t in linked] == [tid]
    tags = linked[0].info.tags
    assert tags["autogk.commit"] == exp["commit"] and tags["autogk.verdict"] == exp["decision"]

    # A sync into a new store (after a clone: the same notes, no trace there) gives the same Duration.
    other = f"sqlite:///{project / 'mlruns' / 'other.db'}"
    monkeypatch.setenv("AUTOGK_TRACKING_URI", other)
    autogk_in(project, "sync")
    c, exp_id, traces = traces_of(project)
    assert traces == []  # the trace lived in the old store; nothing to link, and no error
    [run] = c.search_runs([exp_id], filter_string=f"tags.`autogk.commit` = '{exp['commit']}'")
    assert abs((run.info.end_time - run.info.start_time) - wall_ms) < 5


def test_tracking_off_means_no_trace_and_no_store(project, api, monkeypatch):
    without_store(project)  # the shared template carries an empty store: start as `init` leaves a project
    monkeypatch.setenv("AUTOGK_TRACKING_ENABLED", "false")
    api([tool_use("edit_file", {"path": KERNEL, "old": "BLOCK = 64 ", "new": "BLOCK = 128 "}),
         finish("BLOCK 64 -> 128")])
    prop = propose(project)
    assert prop.changed and "trace_id" not in prop.usage
    assert not (project / "mlruns" / "mlflow.db").exists()


def test_a_store_that_fails_leaves_the_agent_working_and_says_so_once(project, api, monkeypatch):
    monkeypatch.setenv("AUTOGK_TRACKING_URI", "http://127.0.0.1:9")  # nothing listens there
    api([tool_use("edit_file", {"path": KERNEL, "old": "BLOCK = 64 ", "new": "BLOCK = 128 "}),
         finish("BLOCK 64 -> 128")])
    lines = []
    project_ = Project(project)
    ctx = Context(worktree=project, target=project_.target("scale"), number=3, history=[],
                  config=project_.config, say=lines.append)
    prop = AnthropicAgent(ctx.config).propose(ctx)
    assert prop.changed and "trace_id" not in prop.usage
    warns = [ln for ln in lines if "MLflow trace" in ln]
    assert len(warns) == 1 and "the experiment goes on" in warns[0]


def test_only_the_tracking_package_imports_mlflow():
    """traces.py joins the store, run logging and sync as the only importers of mlflow (the agent calls them)."""
    import ast
    from pathlib import Path
    pkg = Path(__file__).resolve().parents[2] / "autogk_git"
    users = set()
    for p in pkg.rglob("*.py"):
        for node in ast.walk(ast.parse(p.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            if any(n == "mlflow" or n.startswith("mlflow.") for n in names):
                users.add(p.relative_to(pkg).as_posix())
    assert users == {"tracking/store.py", "tracking/runs.py", "tracking/sync.py", "tracking/traces.py"}, users

