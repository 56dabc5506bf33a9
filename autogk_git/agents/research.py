"""The research agent and its triggers: when the loop stalls, write a plan for the next experiments.

A plan is a markdown note on `refs/notes/autogk/plans`, on the commit that was the trunk's tip when it
was written (experiment commits carry their own, shorter plan notes there too; a research plan is told
apart by its last line, `<!-- autogk-plan {json} -->`). The next `[research] follow` experiments of the
target read it and link to it with an `Autogk-Plan: <that commit>` trailer; a newer plan replaces it.

Triggers (each configurable in `[research]`), counted over the experiments since the last plan:
    wall      the last `wall` experiments were all incorrect;
    plateau   the last `plateau` experiments' figures lie within `plateau_tol` of each other. The figure is
              the geometric mean of the candidate's latency over its timed workloads (ab, else stride). Untimed
              backends (the CPU interpreter) have no figure: there a plateau is `plateau` experiments in a
              row that did not move the trunk (none kept);
    repeat    a proposal repeated a kernel already measured (the loop discards it without benchmarking);
    demand    `autogk research`.

The research agent starts fresh and reads only git history, notes and artifacts. With ANTHROPIC_API_KEY
it asks Claude (read-only tools, then write_plan); without one it writes an offline plan from the
statistics alone and says so.
"""
from __future__ import annotations

import datetime as dt
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable

from autogk_git import tunables
from autogk_git.record.tally import Tally
from autogk_git.record import notes
from autogk_git.record import refs
from autogk_git.record.figures import latencies
from autogk_git.agents import prompts
from autogk_git.git import repo

MARK = "<!-- autogk-plan "
_MARK_RE = re.compile(r"<!-- autogk-plan (\{.*\}) -->\s*$", re.S)
SECTIONS = (("diagnosis", "Diagnosis"), ("strategy", "Strategy"), ("actions", "Actions"), ("avoid", "What not to try"))


@dataclass
class Plan:
    commit: str                      # the trunk tip it annotates; experiments link to it
    target: str
    after: int                       # the last experiment number when it was written
    trigger: str
    text: str
    meta: dict[str, Any] = field(default_factory=dict)


# ------------------------------------------------------------------------------------------------
# Reading plans
# ------------------------------------------------------------------------------------------------

def parse_plan(commit: str, text: str) -> Plan | None:
    m = _MARK_RE.search(text.strip())
    if not m:
        return None
    try:
        meta = json.loads(m.group(1))
    except json.JSONDecodeError:
        return None
    return Plan(commit, meta.get("target", ""), int(meta.get("after", 0)), meta.get("trigger", ""), text, meta)


def plans(root, target: str) -> list[Plan]:
    """Every research plan of a target that this clone wrote, oldest first (a few git processes). A plan
    note fetched from a remote (or added by hand) is neither followed nor counted: the agents would be
    told to follow a collaborator's (or anyone's) text, and a large `after` in it would mute the triggers."""
    mine = repo.own_noted(root, refs.NOTES_PLANS)
    out = [p for c, t in repo.read_notes(root, refs.NOTES_PLANS).items()
           if c in mine and (p := parse_plan(c, t)) and p.target == target]
    return sorted(out, key=lambda p: (p.after, p.meta.get("created", "")))


def followers(root, plan: Plan, history: list[dict[str, Any]]) -> list[int]:
    """Numbers of the experiments that link to a plan."""
    later = {r["commit"]: r.get("experiment") for r in history if (r.get("experiment") or 0) > plan.after
             and r.get("commit")}
    info = repo.commit_info(root, list(later))
    return [later[c] for c, i in info.items() if repo.trailers(i["body"]).get("Autogk-Plan") == plan.commit]


def pending(root, target: str, history: list[dict[str, Any]], follow: int,
            known: list[Plan] | None = None) -> Plan | None:
    """The newest plan, while fewer than `follow` experiments have followed it."""
    ps = plans(root, target) if known is None else known
    if not ps:
        return None
    p = ps[-1]
    return p if len(followers(root, p, history)) < follow else None


# ------------------------------------------------------------------------------------------------
# Triggers
# ------------------------------------------------------------------------------------------------

def figure(result: dict[str, Any]) -> float | None:
    """The experiment's speed figure: geomean candidate latency (us) over its most paired timed stage
    (ab, else stride); None untimed."""
    if not result.get("timing"):
        return None
    lat = [x for x in latencies(result).values() if x > 0]
    if not lat:
        return None
    return math.exp(sum(math.log(x) for x in lat) / len(lat))


def due(history: list[dict[str, Any]], cfg, since: int = 0) -> str | None:
    """The trigger that fires on this history (experiments after `since` only), or None."""
    rc = cfg.research
    # An invalid experiment (the agent reached outside its files) was never judged: it says nothing
    # of the kernel, so it is neither incorrect for the wall nor a point of a plateau.
    recent = [r for r in history if (r.get("experiment") or 0) > since
              and (r.get("verdict") or {}).get("decision") != "invalid"]
    if rc.wall and len(recent) >= rc.wall and not any(r.get("correct") for r in recent[-rc.wall:]):
        return f"correctness wall: the last {rc.wall} experiments were incorrect"
    if rc.plateau and len(recent) >= rc.plateau:
        last = recent[-rc.plateau:]
        figs = [figure(r) for r in last]
        if all(f is not None for f in figs):
            spread = max(figs) / min(figs) - 1
            if spread <= rc.plateau_tol:
                return (f"plateau: the last {rc.plateau} experiments lie within {spread:.1%} of each other "
                        f"(<= {rc.plateau_tol:.0%})")
        elif not any(r.get("timing") for r in last) and \
                not any((r.get("verdict") or {}).get("decision") == "keep" for r in last):
            return f"plateau (untimed backend): the last {rc.plateau} experiments did not move the trunk"
    return None


# ------------------------------------------------------------------------------------------------
# Writing plans
# ------------------------------------------------------------------------------------------------

def render(sections: dict[str, Any], meta: dict[str, Any], profile: list[str] | None = None) -> str:
    """The plan note; `profile`: the profile section's lines (bench/ncu.view_lines), written by autogk, so
    a follower reads the figures the plan was written from even when the plan's writer did not quote them."""
    lines = [f"# Research plan for {meta['target']} (after #{meta['after']:04d})", "",
             f"Trigger: {meta['trigger']}. Written by: {meta['agent']}.", ""]
    for key, title in SECTIONS:
        val = sections.get(key) or ""
        lines += [f"## {title}", ""]
        if isinstance(val, list):
            lines += [f"{i}. {x}" if key == "actions" else f"- {x}" for i, x in enumerate(val, 1)]
        else:
            lines.append(str(val).strip())
        lines.append("")
    if profile and not profile[0].startswith("no profile: "):  # "no profile" is said by every view already
        lines += ["## Profile the plan was written from", "", *[ln for ln in profile if ln.strip()], ""]
    lines.append(MARK + json.dumps(meta, sort_keys=True) + " -->")
    return "\n".join(lines) + "\n"


def tried_configs(history: list[dict[str, Any]]) -> set[str]:
    out = set()
    for r in history:
        for k in ("tunables", "parent_tunables"):
            if r.get(k):
                out.add(json.dumps(r[k], sort_keys=True))
    return out


def offline_sections(history: list[dict[str, Any]], kernel: str, inspector: dict[str, Any], trigger: str,
                     program: str | None) -> dict[str, Any]:
    """A plan from the statistics alone: no model, no guessing beyond what the data shows."""
    kept = [r for r in history if (r.get("verdict") or {}).get("decision") == "keep"]
    wrong = [r for r in history if not r.get("correct")]
    statuses: dict[str, int] = {}
    for r in wrong:
        reason = (r.get("verdict") or {}).get("reason") or ""
        m = re.search(r"\b([A-Z_]{6,})\b", reason)
        statuses[m.group(1) if m else "other"] = statuses.get(m.group(1) if m else "other", 0) + 1
    counts = Tally.of((r.get("verdict") or {}).get("decision") for r in history)
    diag = [f"{counts.words()}; {len(wrong)} incorrect." + (
        f" Failures: {', '.join(f'{k} x{v}' for k, v in statuses.items())}." if statuses else "")]
    figs = [(r.get("experiment"), figure(r)) for r in history[-8:]]
    figs = [(n, f) for n, f in figs if f is not None]
    if figs:
        diag.append("Recent figures (geomean us): " + ", ".join(f"#{n} {f:.3g}" for n, f in figs) + ".")
    else:
        diag.append("No latency was measured (an untimed backend): verdicts rest on correctness alone.")
    regimes = inspector.get("regimes", {})
    if figs:
        diag.append("Workloads: " + ", ".join(f"{v} {k}" for k, v in sorted(regimes.items())) + ".")
    else:  # the regimes are guesses from bytes moved: without a time they are not a diagnosis
        diag.append("Workloads by bytes moved alone (nothing was timed, so no regime is measured): "
                    + ", ".join(f"{v} {k} by size" for k, v in sorted(regimes.items())) + ".")
    decl = tunables.parse(kernel)
    tried = tried_configs(history)
    current = {n: t.value for n, t in decl.items()}
    moves = []
    for n, t in decl.items():
        for c in t.choices:
            cand = json.dumps(dict(current, **{n: c}), sort_keys=True)
            if c != t.value and cand not in tried:
                moves.append(f"set {n} = {c!r} (from {t.value!r}), one change, keep the rest")
    main = max(regimes, key=regimes.get) if regimes else ""
    if trigger.startswith("correctness wall"):
        strategy = ("Correctness first. Go back to the trunk's kernel and make a smaller change; re-read the "
                    "numerical hazards in program.md and check every output element is written (masks, tails).")
    elif not figs:
        strategy = ("Nothing was timed (an untimed backend checks correctness only), so no plan can say where the "
                    "time goes: keep changes correct, and time the held ones on a GPU "
                    "(`autogk iterate --backend local`).")
    elif main == "launch-bound":
        strategy = ("Most workloads are launch-bound: cut per-call overhead (fewer, larger programs; fewer "
                    "kernel launches per call; no host-side work in run()).")
    elif main == "memory-bound":
        strategy = ("Most workloads are memory-bound: read and write each byte once, with wide, coalesced "
                    "accesses; keep the math in registers.")
    else:
        strategy = "Workloads fit in cache: balance occupancy against work per program (block sizes, warps)."
    if moves:
        strategy += " Untried one-step tunable moves remain; try them before restructuring."
    else:
        strategy += (" Every one-step tunable move has been tried: the tuner tries pairs of changes next, "
                     "those whose single changes measured best first; a larger gain needs a structural "
                     "change (an LLM agent or a person).")
    avoid = []
    for r in history:
        v = r.get("verdict") or {}
        if v.get("decision") == "revert":
            avoid.append(f"#{r.get('experiment')}: {r.get('hypothesis')} ({notes.fit(v.get('reason') or '', 100)})")
    actions = moves[:5] or ["write a structural change by hand or with --agent anthropic / command"]
    return {"diagnosis": " ".join(diag) + f" Trigger: {trigger}.", "strategy": strategy, "actions": actions,
            "avoid": avoid[-8:] or ["nothing recorded yet"]}


def research(project, target, trigger: str, say: Callable[[str], None], mode: str = "auto",
             client=None) -> tuple[Plan, dict[str, Any]]:
    """Write a plan note on the trunk tip; returns (plan, usage)."""
    from autogk_git.agents import workload_view as inspect
    from autogk_git.agents.anthropic_agent import api_key
    from autogk_git.record import experiments

    cfg = project.config
    mode = mode if mode != "auto" else cfg.research.agent
    if mode == "auto":
        mode = "anthropic" if api_key() else "offline"
    tip = experiments.ensure_trunk(project, say)
    history = experiments.results(project, target.name, own_only=True)
    after = max((r.get("experiment") or 0 for r in history), default=0)
    art = inspect.write_artifact(project, target)
    stats = json.loads((art.parent / "workloads.json").read_text())
    kernel = repo.show_file(project.root, tip, f"{target.rel}/kernel.py") or ""
    program = repo.show_file(project.root, tip, f"{target.rel}/program.md")
    usage: dict[str, Any] = {}
    if mode == "anthropic":
        say(f"research: asking {cfg.research.model or cfg.agent.model} for a plan ({trigger})")
        sections, usage = _ask_model(project, target, tip, history, trigger, art, say, client, axes_of(stats))
        agent = f"anthropic ({cfg.research.model or cfg.agent.model})"
    else:
        sections = offline_sections(history, kernel, stats, trigger, program)
        agent = "offline (statistics only; set ANTHROPIC_API_KEY for a model-written plan)"
    meta = {"target": target.name, "after": after, "trigger": trigger, "agent": agent, "trunk": tip,
            "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "cost_usd": usage.get("cost_usd", 0.0), "tokens": usage.get("tokens", 0)}
    from autogk_git.bench import ncu
    text = render(sections, meta, ncu.view_lines(history, cfg, axes_of(stats)))
    repo.write_note(project.root, refs.NOTES_PLANS, tip, text)
    say(f"research: plan written on {tip[:10]} (git notes --ref autogk/plans show {tip[:10]})")
    return Plan(tip, target.name, after, trigger, text, meta), usage


def axes_of(stats: dict[str, Any]) -> dict[str, dict]:
    """Each workload's axes, by uuid, from the workload inspector's statistics."""
    return {r["uuid"]: r["axes"] for r in stats["per_workload"]}


def _ask_model(project, target, tip, history, trigger, artifact, say, client, axes=None
               ) -> tuple[dict[str, Any], dict[str, Any]]:
    from autogk_git.agents import tools
    from autogk_git.agents.anthropic_agent import Conversation

    cfg = project.config
    root = project.root

    def read_file(a):
        path = a.get("path")
        if not isinstance(path, str) or ".." in path.split("/") or path.startswith("/"):
            raise tools.ToolError("'path' must be a repo-relative path without '..'")
        if "/" not in path:
            path = f"{target.rel}/{path}"
        if not path.startswith(target.rel + "/"):
            raise tools.ToolError(f"only files under {target.rel}/ can be read")
        text = repo.show_file(root, tip, path)
        if text is None:
            raise tools.ToolError(f"{path}: not in the trunk's tree")
        return text[:tools.MAX_READ]

    def show_experiment(a):
        try:
            n = int(a.get("number"))
        except (TypeError, ValueError):
            raise tools.ToolError("'number' must be an experiment number") from None
        r = next((r for r in history if r.get("experiment") == n), None)
        if r is None:
            raise tools.ToolError(f"no experiment #{n}; see history")
        diff = repo.diff(root, r["parent"], r["commit"], target.rel) if r.get("parent") else ""
        plan = repo.read_note(root, refs.NOTES_PLANS, r["commit"]) or ""
        return f"{notes.summary_line(r)}\n\nplan:\n{plan[:3000]}\n\ndiff:\n{diff[:12000]}"

    def git_log(a):
        return _first_parent_log(root, project.trunk)

    handlers = {
        "read_file": read_file,
        "history": lambda a: tools.history_rows(history, a.get("last", 50)),
        "show_experiment": show_experiment,
        "git_log": git_log,
        "read_artifact": lambda a: (tools.profile_text(history, cfg, axes=axes) if a.get("name") == "profile"
                                    else artifact.read_text()),
    }
    defs = [d for d in tools.READ_TOOLS if d["name"] in ("read_file", "history", "read_artifact")] + [
        tools._schema("show_experiment", "One experiment: verdict, plan note and diff against its parent.",
                      {"number": {"type": "integer"}}, ["number"]),
        tools._schema("git_log", "The trunk's first-parent history (the kept experiments, with figures).", {}, []),
        tools._schema("write_plan", "Write the plan and end.", {
            "diagnosis": {"type": "string"}, "strategy": {"type": "string"},
            "actions": {"type": "array", "items": {"type": "string"}},
            "avoid": {"type": "array", "items": {"type": "string"}}}, ["diagnosis", "strategy", "actions", "avoid"]),
    ]

    def check(args):
        for key in ("diagnosis", "strategy"):
            if not isinstance(args.get(key), str) or not args[key].strip():
                return f"'{key}' must be a non-empty string"
        for key in ("actions", "avoid"):
            if not isinstance(args.get(key), list) or not all(isinstance(x, str) for x in args[key]):
                return f"'{key}' must be a list of strings"
        return None

    first = (f"Trigger: {trigger}.\nTarget: {target.name}; trunk tip {tip[:10]}; {len(history)} experiments so far.\n"
             + "".join(f"{ln}\n" for ln in prompts.floor.prompt_lines(history))
             + "".join(f"{ln}\n" for ln in prompts.ncu.view_lines(history, cfg, axes))
             + f"Experiments:\n{prompts._table(history, last=25)}\n\nRead what you need, then call write_plan.")
    conv = Conversation(cfg, cfg.research.model or cfg.agent.model, say, client)
    args = conv.run(prompts.RESEARCH_SYSTEM, first, defs, handlers, "write_plan", cfg.research.max_turns,
                    cfg.agent.max_tokens, check)
    return {k: args[k] for k, _ in SECTIONS}, conv.usage()


def _first_parent_log(root, trunk: str) -> str:
    from autogk_git.git import commits
    return commits.first_parent_log(root, trunk, 50)[:12000]
