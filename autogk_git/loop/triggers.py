"""When to ask the research agent for a plan, and which plan the next experiment follows.

Both schedulers ask `Research.next_plan()` before opening an experiment and tell it each outcome
(`after`), so a correctness wall, a plateau or a repeated kernel brings a plan in parallel mode too.
"""
from __future__ import annotations

from typing import Any, Callable

from autogk_git.agents.pricing import add_usage
from autogk_git.errors import AgentError
from autogk_git.loop import experiment as ex
from autogk_git.project import Project, Target


class Research:
    """The research policy of one loop run: triggers, a failed call not retried at once, plan following."""

    def __init__(self, project: Project, target: Target, say: Callable[[str], None], report) -> None:
        self.project, self.target, self.say, self.report = project, target, say, report
        self.trigger: str | None = None       # a trigger set by an outcome (a repeat), fired next time
        self.failed_at = -1                   # a failed research call is not retried before a new result

    def write_plan(self, trigger: str):
        """Write a plan (LLM or offline, per [research] agent); its cost counts toward the loop's budget."""
        from autogk_git.agents import research
        try:
            plan, usage = research.research(self.project, self.target, trigger, self.say)
        except AgentError as e:
            add_usage(self.report.usage, getattr(e, "usage", {}) or {})
            self.say(f"research failed ({e.message}); going on without a plan")
            return None
        add_usage(self.report.usage, usage)
        self.report.research.append({"commit": plan.commit, "trigger": trigger, "after": plan.after,
                                     "agent": plan.meta.get("agent"), "cost_usd": usage.get("cost_usd", 0.0)})
        return plan

    def next_plan(self, in_flight: list[dict[str, Any]] = ()):
        """The plan the next experiment follows (writing one first when a trigger fires), or None.

        `in_flight` ({experiment, commit}) counts experiments committed but not measured yet as
        followers, so the parallel loop does not follow a plan more often than [research] follow."""
        from autogk_git.agents import research
        cfg, name, root = self.project.config, self.target.name, self.project.root
        history = ex.results(self.project, name, own_only=True)
        plans = research.plans(root, name)
        trigger = self.trigger or research.due(history, cfg, since=plans[-1].after if plans else 0)
        self.trigger = None
        fired = bool(trigger and self.failed_at != len(history))
        if fired:
            self.say(f"research trigger: {trigger}")
            if self.write_plan(trigger) is None:
                self.failed_at = len(history)
            plans = research.plans(root, name)
        plan = research.pending(root, name, [*history, *in_flight], cfg.research.follow, plans)
        if plan:
            self.say(f"following the research plan on {plan.commit[:10]} ({plan.trigger})")
        return plan

    def after(self, outcome: dict[str, Any]) -> None:
        """An experiment's outcome: a repeated kernel asks for a plan (when [research] repeat is on)."""
        if outcome["decision"] == "repeat" and self.project.config.research.repeat:
            self.trigger = f"repeat: experiment #{outcome['number']:04d} {outcome['reason']}"
