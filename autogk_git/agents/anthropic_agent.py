"""Claude through the Anthropic Messages API with tool use. The only module importing `anthropic`.

Retries are ours, not the SDK's (the SDK is built with max_retries=0): 408, 409, 429, 5xx (529 is
"overloaded") and timeouts or dropped connections are retried up to `[agent] retries` times with
exponential backoff, honouring the server's retry-after but never waiting longer than
`[agent] retry_max_s`. The API key is read from ANTHROPIC_API_KEY only and never written anywhere.
"""
from __future__ import annotations

import random
import time
from typing import Any, Callable

from autogk_git import env
from autogk_git.agents import prompts, tools
from autogk_git.agents.base import AgentStopped, Context, Proposal
from autogk_git.agents.pricing import Meter
from autogk_git.errors import AgentError

KEY_ENV = env.ANTHROPIC_API_KEY

Handlers = dict[str, Callable[[dict[str, Any]], str]]


def api_key() -> str | None:
    return env.anthropic_api_key()


def make_client(config):
    """An SDK client: key from the environment, base URL from ANTHROPIC_BASE_URL, our own retries."""
    key = api_key()
    if not key:
        raise AgentError(f"{KEY_ENV} is not set, so the anthropic agent cannot call the API",
                         f"export {KEY_ENV}=... (never put it in .autogk.toml), or run with --agent tune")
    import anthropic  # heavy: imported only here, only when an LLM agent runs

    return anthropic.Anthropic(api_key=key, base_url=env.anthropic_base_url(), max_retries=0,
                               timeout=float(config.agent.timeout_s))


def _retry_after(err) -> float | None:
    resp = getattr(err, "response", None)
    headers = getattr(resp, "headers", None) or {}
    for name, scale in (("retry-after-ms", 1e-3), ("retry-after", 1.0)):
        try:
            return float(headers.get(name)) * scale
        except (TypeError, ValueError):
            continue
    return None


def is_transient(err) -> bool:
    import anthropic

    if isinstance(err, anthropic.APIConnectionError):  # includes APITimeoutError
        return True
    if isinstance(err, anthropic.APIStatusError):
        return err.status_code in (408, 409, 429) or err.status_code >= 500
    return False


def _plain(block) -> dict[str, Any]:
    """An assistant content block as the dict we send back in the next request."""
    kind = getattr(block, "type", None)
    if kind == "text":
        return {"type": "text", "text": block.text}
    if kind == "tool_use":
        return {"type": "tool_use", "id": block.id, "name": block.name,
                "input": block.input if isinstance(block.input, dict) else {}}
    return block.model_dump(exclude_none=True)


MAX_CALLS_PER_TURN = 64
"""Tool calls of one model response that are run; a response with more is refused whole (the turn budget
counts requests, and one response held 3,013 calls, 12 of them full checks, in a red-team run)."""


class Conversation:
    """One tool-use conversation under a turn budget, a token budget and bounded retries."""

    def __init__(self, config, model: str, say: Callable[[str], None] | None = None, client=None,
                 trace=None) -> None:
        self.config = config
        self.trace = trace  # the conversation's root span (tracking/traces.py), or None: not traced
        self.model = model
        self.say = say or (lambda s: None)
        self.meter = Meter(model, dict(config.agent.prices))
        self.client = client or make_client(config)
        self.turns = 0
        self.t0 = time.monotonic()

    def usage(self) -> dict[str, Any]:
        out = {**self.meter.as_usage(), "turns": self.turns, "agent_s": round(time.monotonic() - self.t0, 2)}
        if self.trace is not None and self.trace.trace_id:
            out["trace_id"] = self.trace.trace_id  # read by the MLflow logging, which links it to the run
        return out

    def _span(self, name: str, kind: str, inputs: Any):
        from autogk_git.tracking.traces import NoSpan
        return self.trace.child(name, kind, inputs) if self.trace is not None else NoSpan()

    def create(self, **kw):
        """One Messages API request with bounded retries on transient failures."""
        retries, cap = self.config.agent.retries, self.config.agent.retry_max_s
        for attempt in range(retries + 1):
            t0 = time.monotonic()
            try:
                resp = self.client.messages.create(**kw)
            except Exception as e:  # noqa: BLE001 - sorted below: transient, or a clear error
                if not is_transient(e):
                    raise AgentError(f"the Messages API refused the request: {type(e).__name__}: {str(e)[:300]}",
                                     self._hint(e)) from None
                if attempt == retries:
                    raise AgentStopped(f"the Messages API kept failing ({type(e).__name__}: {str(e)[:200]}) "
                                       f"after {retries} retries", "try again later, or raise [agent] retries",
                                       usage=self.usage()) from None
                wait = _retry_after(e)
                if wait is None or wait <= 0:
                    wait = (2 ** attempt) * (0.75 + 0.5 * random.random())
                wait = min(wait, cap)
                self.meter.retries += 1
                self.say(f"  API: {type(e).__name__} ({getattr(e, 'status_code', 'no status')}); "
                         f"retry {attempt + 1}/{retries} in {wait:.1f} s")
                time.sleep(wait)
                continue
            u = resp.usage
            self.meter.add({k: getattr(u, k, 0) for k in ("input_tokens", "output_tokens",
                                                          "cache_creation_input_tokens",
                                                          "cache_read_input_tokens")},
                           time.monotonic() - t0)
            return resp
        raise AssertionError("unreachable")

    @staticmethod
    def _hint(e) -> str:
        code = getattr(e, "status_code", None)
        if code == 401:
            return f"check {KEY_ENV}"
        if code == 404:
            return "check [agent] model: the API does not know that model"
        return "check [agent] model and the request; run again with --agent tune to go on offline"

    def run(self, system: str, first: str, tool_defs: list[dict[str, Any]], handlers: Handlers,
            finish: str, max_turns: int, max_tokens: int = 0,
            on_finish: Callable[[dict[str, Any]], str | None] | None = None) -> dict[str, Any]:
        """Talk until the model calls `finish` (whose input is returned) or a budget runs out."""
        try:
            done = self._run(system, first, tool_defs, handlers, finish, max_turns, max_tokens, on_finish)
        except BaseException as e:
            if self.trace is not None:
                self.trace.end({"usage": self.usage()}, error=f"{type(e).__name__}: {e}")
            raise
        if self.trace is not None:
            self.trace.end({"finish": done, "usage": self.usage()})
        return done

    def _run(self, system: str, first: str, tool_defs: list[dict[str, Any]], handlers: Handlers,
             finish: str, max_turns: int, max_tokens: int = 0,
             on_finish: Callable[[dict[str, Any]], str | None] | None = None) -> dict[str, Any]:
        messages: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": first}]}]
        system_blocks = [{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}]
        while self.turns < max_turns:
            self.turns += 1
            _cache_last(messages)
            # A span holds what is new since the last call (the whole list grows by one message a turn).
            span = self._span(f"model call {self.turns}", "CHAT_MODEL",
                              {"model": self.model, "turn": self.turns, "messages": messages[-1:]})
            before = len(self.meter.requests), self.meter.retries
            try:
                resp = self.create(model=self.model, max_tokens=self.config.agent.max_output_tokens,
                                   system=system_blocks, messages=messages, tools=tool_defs)
            except BaseException as e:
                span.end(error=f"{type(e).__name__}: {e}", retries=self.meter.retries - before[1])
                raise
            blocks = list(resp.content or [])
            cost = self.meter.requests[-1] if len(self.meter.requests) > before[0] else {}
            span.end({"role": "assistant", "content": [_plain(b) for b in blocks], "stop_reason": resp.stop_reason},
                     retries=self.meter.retries - before[1], **{f"usage.{k}": v for k, v in cost.items()})
            messages.append({"role": "assistant", "content": [_plain(b) for b in blocks] or
                             [{"type": "text", "text": "(no content)"}]})
            if max_tokens and self.meter.tokens >= max_tokens:
                raise AgentStopped(f"token budget spent: {self.meter.tokens} tokens >= {max_tokens} "
                                   f"after {self.turns} turn(s)", "raise [agent] max_tokens, or simplify the target",
                                   usage=self.usage())
            uses = [b for b in blocks if getattr(b, "type", None) == "tool_use"]
            if not uses:
                nudge = ("Your answer was cut off (max_tokens). Continue, using the tools."
                         if resp.stop_reason == "max_tokens" else
                         f"Use the tools: make your change, then call {finish}.")
                messages.append({"role": "user", "content": [{"type": "text", "text": nudge}]})
                continue
            results, done = [], None
            if len(uses) > MAX_CALLS_PER_TURN:  # one response of thousands of calls (run_check among them)
                for b in uses:
                    results.append({"type": "tool_result", "tool_use_id": b.id, "is_error": True,
                                    "content": f"refused: {len(uses)} tool calls in one turn; at most "
                                               f"{MAX_CALLS_PER_TURN} a turn are run"})
                self.say(f"  [turn {self.turns}] {len(uses)} tool calls in one turn: refused (at most "
                         f"{MAX_CALLS_PER_TURN})")
                messages.append({"role": "user", "content": results})
                continue
            for b in uses:
                args = b.input
                if done is not None:  # finish was accepted: what follows it in the response is not run
                    results.append({"type": "tool_result", "tool_use_id": b.id, "is_error": True,
                                    "content": f"not run: it came after {finish}"})
                    continue
                if b.name == finish:
                    if not isinstance(args, dict):
                        content, err = f"{finish} takes a JSON object", True
                    else:
                        problem = on_finish(args) if on_finish else None
                        content, err = (problem, True) if problem else ("ok", False)
                        if not problem:
                            done = args
                else:
                    span = self._span(f"tool {b.name}", "TOOL", args)
                    content, err = tools.dispatch(handlers, b.name, args)
                    span.end(content, error=content[:500] if err else None)
                self.say(f"  [turn {self.turns}] {b.name}{_brief(args)}{' -> error: ' + content[:120] if err else ''}")
                results.append({"type": "tool_result", "tool_use_id": b.id, "content": content, "is_error": err})
            if done is not None:
                return done
            messages.append({"role": "user", "content": results})
        raise AgentStopped(f"turn budget spent: {max_turns} turn(s) without calling {finish}",
                           "raise [agent] max_turns, or make the task smaller", usage=self.usage())


def _cache_last(messages: list[dict[str, Any]]) -> None:
    """Mark only the newest message for prompt caching (the API allows four breakpoints)."""
    for m in messages:
        for block in m["content"]:
            block.pop("cache_control", None)
    messages[-1]["content"][-1]["cache_control"] = {"type": "ephemeral"}


def _brief(args: Any) -> str:
    if isinstance(args, dict) and isinstance(args.get("path"), str):
        return f" {args['path']}"
    return ""


class AnthropicAgent:
    """Makes one change per experiment by talking to Claude with tools scoped to the target."""

    name = "anthropic"
    # Each proposal is a conversation of its own, in its own worktree, writing only there: the parallel
    # loop may ask for several at once (loop/parallel.py), each on a thread of its own.
    concurrent_proposals = True

    def __init__(self, config, client=None) -> None:
        self.config = config
        self.client = client

    def _handlers(self, ctx: Context, box: tools.Sandbox) -> Handlers:
        def check(_args):
            if ctx.check is not None:
                return ctx.check(ctx.worktree)
            return tools.check_worktree(self.config, ctx.target, seed=ctx.number)

        def artifact(args):
            name = args.get("name")
            if name == "profile":  # the ncu profile in the notes first: what the prompt's section also shows
                return tools.profile_text(ctx.history, self.config, ctx.artifacts.get("profile"))
            path = ctx.artifacts.get(name) if isinstance(name, str) else None
            if path is not None and path.exists():
                return path.read_text()
            if name == "workloads":
                from autogk_git.agents import workload_view as inspect
                return inspect.render(inspect.inspect_target(ctx.target))
            raise tools.ToolError(f"no artifact '{name}'; known: workloads, profile")

        return {
            "list_files": lambda a: "\n".join(box.list()),
            "read_file": lambda a: box.read(a.get("path")),
            "write_file": lambda a: box.write(a.get("path"), a.get("content")),
            "edit_file": lambda a: box.edit(a.get("path"), a.get("old"), a.get("new")),
            "history": lambda a: tools.history_rows(ctx.history, a.get("last", 30)),
            "read_artifact": artifact,
            "run_check": check,
        }

    def propose(self, ctx: Context) -> Proposal:
        cfg = self.config
        target = ctx.target
        box = tools.Sandbox(ctx.worktree, target.rel, list(target.editable), list(cfg.agent.docs))
        program = target.program_path.read_text() if target.program_path.exists() else None
        inspector = None
        if "workloads" in ctx.artifacts and ctx.artifacts["workloads"].exists():
            inspector = ctx.artifacts["workloads"].read_text()
        system = prompts.system_prompt(target.name, program, list(target.editable), target.rel)
        first = prompts.task_message(ctx, target.kernel_source(), inspector)
        tool_defs = tools.READ_TOOLS + tools.WRITE_TOOLS
        trace = _trace(ctx, {"model": cfg.agent.model, "system": system, "first_message": first,
                             "tools": [t["name"] for t in tool_defs]})
        conv = Conversation(cfg, cfg.agent.model, ctx.say, self.client, trace=trace)

        def on_finish(args: dict[str, Any]) -> str | None:
            if args.get("nothing_left") is True and not _changed(ctx):
                return None
            hyp = args.get("hypothesis")
            if not isinstance(hyp, str) or not hyp.strip():
                return "'hypothesis' must be a non-empty one-line string"
            if not _changed(ctx):
                return ("no editable file has changed yet: make your ONE change first "
                        "(or call finish with nothing_left=true if there is nothing worth trying)")
            return None

        args = conv.run(system, first, tool_defs, self._handlers(ctx, box), "finish",
                        cfg.agent.max_turns, cfg.agent.max_tokens, on_finish)
        usage = conv.usage()
        if args.get("nothing_left") is True and not _changed(ctx):
            return Proposal("nothing left to try", str(args.get("rationale") or ""), changed=False, usage=usage)
        hyp = " ".join(str(args["hypothesis"]).split())[:200]
        rationale = f"## Plan ({self.name} agent, {cfg.agent.model}, experiment {ctx.number:04d})\n\n"
        rationale += str(args.get("rationale") or hyp).strip() + "\n"
        if ctx.plan_id:
            rationale += f"\nFollows the research plan on {ctx.plan_id[:10]}.\n"
        return Proposal(hyp, rationale, usage=usage)


def _trace(ctx: Context, inputs: dict[str, Any]):
    """The root span of this experiment's conversation in MLflow (tracking/traces.py), secrets hidden."""
    import os

    from autogk_git.bench.judge import hygiene
    from autogk_git.project import Project
    from autogk_git.tracking import traces

    # The API key by name, and every variable whose name looks secret (the judge's own rule).
    hide = [api_key() or "", *hygiene.secret_values(os.environ)]
    try:
        project = Project(ctx.worktree)
    except Exception:  # noqa: BLE001 - no project to trace into (a bare checkout): the agent works untraced
        return None
    return traces.start_conversation(project, ctx.target.name, ctx.number, AnthropicAgent.name, inputs, hide,
                                     ctx.say or (lambda s: None))


def _changed(ctx: Context) -> bool:
    from autogk_git.git import index

    return index.has_changes(ctx.worktree, ctx.target.rel)
