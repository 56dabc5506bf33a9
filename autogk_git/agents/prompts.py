"""Prompts for the LLM agents. The rules are the ones that made the reference loop work."""
from __future__ import annotations

import json
from typing import Any

from autogk_git.bench import ncu
from autogk_git.record import floor

RULES = """\
Rules (they are enforced; breaking one wastes the experiment):
1. ONE change per experiment: a single idea whose effect the benchmark can attribute. Do not bundle.
2. Stay in Triton: the kernel is Triton launched from Python. No CUDA C, no torch fallbacks for the
   computation, no calls into other libraries that do the work.
3. No benchmark gaming: do not special-case the workloads' sizes or values, cache results between calls,
   skip work the reference does, or touch the harness. Inputs are fresh every trial, outputs are
   poisoned before each call and checked after timing too; a result faster than the hardware allows is
   flagged, not kept.
4. Edit only the editable files of the target. Everything else is read-only.
5. Keep the destination-passing contract: run(*inputs, *outputs) writes the outputs in place.
6. Simplicity counts: a tiny gain that adds a lot of hacky code is not worth it.
"""


def system_prompt(target_name: str, program: str | None, editable: list[str], rel: str) -> str:
    parts = [
        f"You are a GPU kernel engineer optimizing the Triton kernel of the target '{target_name}' with autogk.",
        "autogk runs one experiment at a time: you make ONE change to the kernel, autogk commits it, checks "
        "correctness, times it against its parent and keeps it only if it is faster beyond noise.",
        "", RULES,
        f"Editable files: {', '.join(f'{rel}/{g}' for g in editable)}.",
        "Work with the tools: read the files and the history, make your change with edit_file or write_file, "
        "optionally run_check, then call finish with a one-line hypothesis. Be economical with turns.",
    ]
    if program:
        parts += ["", f"The target's program.md (its contract, hazards and rules):", "<program>", program.strip(),
                  "</program>"]
    return "\n".join(parts)


def _table(history: list[dict[str, Any]], last: int = 15) -> str:
    if not history:
        return "No experiments yet: the kernel on the trunk is the starting point."
    lines = ["| # | verdict | hypothesis | figures / reason |", "| --- | --- | --- | --- |"]
    for r in history[-last:]:
        v = r.get("verdict") or {}
        why = v.get("figures") or (v.get("reason") or "")[:120]
        lines.append(f"| {r.get('experiment')} | {v.get('decision', '?')} | {(r.get('hypothesis') or '')[:90]} "
                     f"| {why} |")
    if len(history) > last:
        lines.insert(0, f"(last {last} of {len(history)}; the history tool has more)")
    return "\n".join(lines)


def lessons(history: list[dict[str, Any]], last: int = 8) -> list[str]:
    """What failed before, one line each: the reasons of reverted experiments."""
    out = []
    for r in history:
        v = r.get("verdict") or {}
        if v.get("decision") == "revert":
            out.append(f"#{r.get('experiment')} '{(r.get('hypothesis') or '')[:80]}' was reverted: "
                       f"{(v.get('reason') or '')[:160]}")
    return out[-last:]


def start_lines(ctx) -> list[str]:
    """Where the experiment starts when the search put it on a node off the trunk tip (loop/search.py)."""
    st = getattr(ctx, "start", None)
    if not st:
        return []
    rel = f", its latency {st['latency_vs_trunk']:.3f}x the trunk's" if st.get("latency_vs_trunk") else ""
    return [f"This experiment starts from experiment #{st.get('experiment')} ({st.get('state')}: "
            f"'{(st.get('hypothesis') or '')[:90]}'{rel}), not from the trunk tip: the kernel below is that node's. "
            "It is still timed against the trunk's kernel and kept only if it beats the trunk.", ""]


def profile_lines(ctx, inspector: str | None) -> list[str]:
    """The Nsight Compute profile of the trunk's kernel (bench/ncu.py), or the one line saying why there is
    none; left out when the workload view passed in already carries it."""
    if inspector and ("Nsight Compute profile of" in inspector or "no profile: " in inspector):
        lines = ncu.view_lines(ctx.history, getattr(ctx, "config", None))
        if lines[0] in inspector:
            return []
    return ncu.view_lines(ctx.history, getattr(ctx, "config", None))


def task_message(ctx, kernel: str, inspector: str | None) -> str:
    t = ctx.target
    parts = [f"Experiment {ctx.number:04d} for target '{t.name}'. The kernel ({t.rel}/kernel.py):",
             "```python", kernel.rstrip(), "```", "",
             "Definition (axes, inputs, outputs; the reference is the ground truth):",
             "```json", json.dumps({k: t.definition.get(k) for k in ("name", "axes", "inputs", "outputs")},
                                   indent=1), "```", "",
             "Reference implementation:", "```python", (t.definition.get("reference") or "").rstrip(), "```", ""]
    if inspector:
        parts += [inspector.strip(), ""]
    parts += start_lines(ctx)
    parts += floor.prompt_lines(ctx.history)
    parts += profile_lines(ctx, inspector)
    parts += ["Recent experiments:", _table(ctx.history), ""]
    les = lessons(ctx.history)
    if les:
        parts += ["Lessons (do not repeat these):", *[f"- {x}" for x in les], ""]
    if ctx.plan:
        parts += ["A research plan is pending. Follow it: implement its next untried action.", "<plan>",
                  ctx.plan.strip(), "</plan>", ""]
    parts.append("Make ONE change now, then call finish.")
    return "\n".join(parts)


def command_prompt(ctx, inspector: str | None, hypothesis_file: str) -> str:
    """The prompt handed to an external coding CLI (claude -p, codex exec, ...)."""
    t = ctx.target
    program = t.program_path.read_text() if t.program_path.exists() else ""
    parts = [system_prompt(t.name, program, t.editable, t.rel), "",
             f"You are in the experiment's checkout. The kernel is {t.rel}/kernel.py; the definition is "
             f"{t.rel}/definition.json.", "", *start_lines(ctx), *floor.prompt_lines(ctx.history),
             *profile_lines(ctx, inspector),
             "Recent experiments:", _table(ctx.history), ""]
    les = lessons(ctx.history)
    if les:
        parts += ["Lessons (do not repeat these):", *[f"- {x}" for x in les], ""]
    if inspector:
        parts += [inspector.strip(), ""]
    if ctx.plan:
        parts += ["A research plan is pending; implement its next untried action:", ctx.plan.strip(), ""]
    parts += ["Make ONE change to the editable files. Do not commit (autogk commits), do not edit other files "
              "(autogk discards such edits).",
              f"When done, write ONE line, your hypothesis (what you changed and why it should be faster), "
              f"to the file {hypothesis_file}."]
    return "\n".join(parts)


RESEARCH_SYSTEM = """\
You are the research agent of an autogk kernel-optimization loop. The loop has stalled (see the
trigger). You start fresh: read the experiment history, the notes, the kernel and the workload
statistics with the tools, then write ONE plan for the next experiments with write_plan:
- diagnosis: why progress stalled, from the evidence (verdicts, figures, failure messages);
- strategy: the direction to take next, and why it should pay off on these workloads;
- actions: concrete, single-change experiments in the order to try them;
- avoid: what not to try again, and why.
You cannot edit files. Be specific and brief.
""" + "\n" + RULES
