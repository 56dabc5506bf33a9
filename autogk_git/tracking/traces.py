"""An agent's conversation as an MLflow trace, written span by span while it runs.

One trace per experiment's conversation, in the target's experiment `autogk/<target>` (its Traces tab):

    #0007 anthropic agent          AGENT       inputs: system prompt, first message, tool names
      model call 1                 CHAT_MODEL  inputs: the messages new since the last call; outputs: the
                                               assistant's blocks, stop reason, tokens
      tool read_file               TOOL        inputs: the tool's arguments; outputs: what the model got
      model call 2                 ...

Spans are exported synchronously as each one ends (MLflow's incremental span export), so a person
watching `autogk ui` sees the conversation grow while the agent thinks, not after it. When the result
note is logged, `runs.log_result` links the trace (its id travels in the note's `cost.trace_id`)
to the experiment's run, so the run's own Traces tab shows it too.

Secrets never reach a trace: every input, output and attribute passes through `redact` with the values
the caller hides (the API key, and every variable whose name looks secret). The SDK client, which holds
the key, is never traced (no autolog): spans are built here from plain request and response data.
Tracing never stops an agent: a store that fails turns tracing off for the conversation, with one line.
"""
from __future__ import annotations

import os
from typing import Any, Callable

REDACTED = "***"
MAX_TEXT = 20_000  # characters of one string in a span: a whole kernel fits, a runaway output does not


def redact(obj: Any, hide: list[str]) -> Any:
    """obj (str, list, dict, nested) with every hidden value replaced by ***, long strings cut."""
    if isinstance(obj, str):
        for v in hide:
            if v and v in obj:
                obj = obj.replace(v, REDACTED)
        return obj if len(obj) <= MAX_TEXT else obj[:MAX_TEXT] + f"... ({len(obj) - MAX_TEXT} more characters)"
    if isinstance(obj, dict):
        return {redact(str(k), hide): redact(v, hide) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [redact(v, hide) for v in obj]
    if obj is None or isinstance(obj, (bool, int, float)):
        return obj
    return redact(str(obj), hide)


class NoSpan:
    """What a conversation gets when tracking is off or the store failed: every call does nothing."""

    trace_id: str | None = None

    def child(self, name: str, kind: str, inputs: Any = None) -> "NoSpan":
        return self

    def end(self, outputs: Any = None, error: str | None = None, **attributes: Any) -> None:
        pass


class Span:
    """One live MLflow span; children are started under it explicitly (no thread-local context), so
    parallel experiments' conversations in threads never nest into each other."""

    def __init__(self, live, hide: list[str], say: Callable[[str], None], state: dict[str, bool]) -> None:
        self._live, self._hide, self._say, self._state = live, hide, say, state
        self.trace_id: str | None = live.trace_id

    def _failed(self, e: BaseException) -> None:
        if self._state.get("on", False):
            self._state["on"] = False
            self._say(f"warning: the agent's MLflow trace stopped ({type(e).__name__}: {str(e)[:160]}); "
                      "the experiment goes on")

    def child(self, name: str, kind: str, inputs: Any = None) -> "Span | NoSpan":
        if not self._state["on"]:
            return NoSpan()
        try:
            import mlflow
            live = mlflow.start_span_no_context(name, span_type=kind, parent_span=self._live,
                                                inputs=redact(inputs, self._hide))
            return Span(live, self._hide, self._say, self._state)
        except Exception as e:  # noqa: BLE001 - a trace is a view: it never stops the agent
            self._failed(e)
            return NoSpan()

    def end(self, outputs: Any = None, error: str | None = None, **attributes: Any) -> None:
        if not self._state["on"]:
            return
        try:
            from mlflow.entities import SpanStatusCode
            if attributes:
                self._live.set_attributes(redact(attributes, self._hide))
            status = SpanStatusCode.ERROR if error else SpanStatusCode.OK
            if error:
                self._live.set_attribute("error", redact(error, self._hide))
            self._live.end(outputs=redact(outputs, self._hide), status=status)
        except Exception as e:  # noqa: BLE001
            self._failed(e)


def start_conversation(project, target: str, number: int, agent: str, inputs: dict[str, Any],
                       hide: list[str], say: Callable[[str], None]) -> Span | NoSpan:
    """The root span of experiment `number`'s conversation, in `autogk/<target>`; NoSpan when tracking
    is off or the store cannot be used (said once)."""
    if not project.config.tracking.enabled:
        return NoSpan()
    hide = sorted({h for h in hide if h}, key=len, reverse=True)
    try:
        from autogk_git.tracking.store import target_experiment
        _, exp_id = target_experiment(project, target)
        import mlflow
        # Each span is written as it ends (not by a background queue at the end of the trace): the view
        # is live, and a loop killed mid-conversation leaves the spans it had. Local SQLite: ~ms a span.
        os.environ.setdefault("MLFLOW_ENABLE_ASYNC_TRACE_LOGGING", "false")
        if mlflow.get_tracking_uri() != project.tracking_uri():
            # The tracer exports where this project logs. MLflow also exports the URI to the environment
            # for child processes; the benchmark's and agents' processes have no use for it.
            from mlflow.environment_variables import MLFLOW_TRACKING_URI
            before = MLFLOW_TRACKING_URI.get() if MLFLOW_TRACKING_URI.defined else None
            mlflow.set_tracking_uri(project.tracking_uri())
            if before is None:
                MLFLOW_TRACKING_URI.unset()
            else:
                MLFLOW_TRACKING_URI.set(before)
        tags = {"autogk.target": target, "autogk.number": f"{number:04d}", "autogk.agent": agent}
        live = mlflow.start_span_no_context(f"#{number:04d} {agent} agent", span_type="AGENT",
                                            inputs=redact(inputs, hide), experiment_id=exp_id, tags=tags)
    except Exception as e:  # noqa: BLE001 - a trace is a view: it never stops the agent
        say(f"warning: no MLflow trace of the agent's conversation ({type(e).__name__}: {str(e)[:160]}); "
            "the experiment goes on")
        return NoSpan()
    return Span(live, hide, say, {"on": True})
