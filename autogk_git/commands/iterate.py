"""`autogk iterate`: the loop."""
from __future__ import annotations

import json

import click

from autogk_git.project import Project


@click.command("iterate", help="Run the optimization loop: propose, commit, benchmark, keep or revert.")
@click.option("-n", "n", type=click.IntRange(min=0), default=3, show_default=True,
              help="experiments to run; 0: until the agent stops or a budget is reached")
@click.option("--target", "-t", help="target name (default: [project] target, or the only one)")
@click.option("--agent", type=click.Choice(["auto", "tune", "anthropic", "command"]),
              help="override [agent] kind; auto: anthropic with ANTHROPIC_API_KEY set, else tune")
@click.option("--backend", type=click.Choice(["auto", "interpret", "local", "modal"]), help="override [bench] backend")
@click.option("--max-time", type=float, default=0.0, help="stop starting experiments after this many seconds")
@click.option("--max-iterations", type=click.IntRange(min=0), default=None,
              help="stop after this many experiments (overrides -n; 0: no limit)")
@click.option("--budget-usd", type=click.FloatRange(min=0), default=None,
              help="stop starting experiments once spend (LLM tokens, and GPU time priced by [bench] "
                   "usd_per_gpu_hour) reaches this (overrides [agent] budget_usd; 0: none)")
@click.option("--parallel", "-j", type=click.IntRange(min=1), default=1, show_default=True,
              help="experiments at once, each in its own worktree and on its own GPU (or Modal container)")
@click.option("--merge-untimed", is_flag=True,
              help="merge correct candidates an untimed backend (CPU) cannot time, instead of holding them "
                   "(overrides [bench] untimed)")
@click.option("--from", "start", metavar="N",
              help="branch every experiment from experiment N (kept, archived or held; or 'trunk') instead of "
                   "the node [search] strategy picks; each is still judged against the trunk")
@click.option("--json", "as_json", is_flag=True, help="print a JSON report at the end")
def iterate(n, target, agent, backend, max_time, max_iterations, budget_usd, parallel, merge_untimed, start,
            as_json) -> int:
    import os
    from autogk_git.loop.iterate import iterate as run_loop

    if backend:
        os.environ["AUTOGK_BENCH_BACKEND"] = backend
    if merge_untimed:
        os.environ["AUTOGK_BENCH_UNTIMED"] = "merge"
    project = Project.find()
    say = (lambda s: click.echo(s, err=True)) if as_json else click.echo
    update_old_shims(project.root, say)
    if max_iterations is not None:
        n = max_iterations
    try:
        report = run_loop(project, target, n, agent, say, max_time_s=max_time, budget_usd=budget_usd,
                          parallel=parallel, start=start)
    except KeyboardInterrupt:
        interrupted(project, target)
        raise SystemExit(130) from None
    if as_json:
        click.echo(json.dumps(report.as_dict(), indent=1))
    else:
        click.echo("\n" + summary(report))
    if report.nothing_to_try:  # not a success: the user asked for experiments and none could run
        click.echo(ways_forward(project, report.target), err=True)
        return 1
    if as_json:
        return 1 if report.failed else 0
    from autogk_git.invocation import command_name
    cmd = command_name()
    click.echo(f"look at: {cmd} log  |  git log --first-parent {project.trunk}  |  {cmd} show N  |  {cmd} ui")
    return 1 if report.failed else 0


def interrupted(project: Project, target: str | None) -> None:
    """After Ctrl-C: which experiments are left open and the commands that finish them."""
    from autogk_git.loop.iterate import left_open
    try:
        name = project.target(target).name
        still = left_open(project, name)
    except Exception:  # noqa: BLE001 - a second failure must not hide the interruption itself
        still, name = [], target or ""
    if not still:
        click.echo("\ninterrupted: nothing is left open; `autogk iterate` starts the next experiment", err=True)
        return
    names = ", ".join(f"#{n:04d} ({b})" for n, b in still)
    first = still[0][0]
    click.echo(f"\ninterrupted: left open: {names}. Conclude it without starting another: "
               f"autogk conclude {first} --target {name}; or resume the loop (it concludes them first): "
               f"autogk iterate --target {name}", err=True)


def summary(report) -> str:
    """The end-of-run lines: every experiment this run concluded, hand-made and resumed ones included."""
    done = report.concluded
    kept = sum(e["decision"] == "keep" for e in done)
    reverted = sum(e["decision"] == "revert" for e in done)
    held = sum(e["decision"] == "untimed" for e in done)
    invalid = sum(e["decision"] == "invalid" for e in done)
    repeats = sum(e["decision"] == "repeat" for e in done)
    earlier = len(done) - len(report.experiments)
    parts = [f"done: {kept + reverted + held + invalid} experiment(s) concluded"
             + (f" ({earlier} left open before this run)" if earlier else ""),
             f"{kept} kept", f"{reverted} reverted"]
    if held:
        parts.append(f"{held} held untimed (correct, but not timed: not merged; see `autogk log --state held`)")
    if invalid:
        parts.append(f"{invalid} invalid (the agent reached outside the kernel: see `autogk show N`)")
    if repeats:
        parts.append(f"{repeats} discarded as repeats")
    line = ", ".join(parts)
    if report.usage.get("requests"):
        line += f"; LLM: {report.usage.get('tokens', 0)} tokens, ${float(report.usage.get('cost_usd', 0.0)):.4f}"
    if report.gpu_usd:
        line += f"; GPU time: ${report.gpu_usd:.4f} ([bench] usd_per_gpu_hour)"
    if report.research:
        line += f"; {len(report.research)} research plan(s)"
    timing = time_line(report.experiments)
    return f"{line}\n" + (f"{timing}\n" if timing else "") + f"stopped: {report.stop_reason}"


def time_line(experiments: list[dict]) -> str:
    """Where this run's time went (each experiment's `phases`), and a hint when proposing is what limits it.

    An agent asked in the loop's thread (the tuner, a command agent) proposes one change at a time,
    however many slots benchmark: when that takes longer than the benchmarks, more `--parallel` slots do
    not make the run faster. (The anthropic agent is asked for every free slot at once.)"""
    from autogk_git.loop.step import phase_totals
    tot = phase_totals(experiments)
    if not tot:
        return ""
    text = (f"time: proposing {tot['open_s']:.1f} s, benchmarks {tot['bench_s']:.1f} s ({tot['benchmarks']}), "
            f"concluding {tot['conclude_s']:.1f} s"
            + (f", finished benchmarks waiting for the loop {tot['wait_s']:.1f} s" if tot["wait_s"] >= 0.05 else ""))
    slots = len({e.get("slot") for e in experiments if e.get("phases")})
    if slots > 1 and tot["open_alone_s"] > tot["bench_s"] / slots:  # proposals asked in the loop's thread
        text += ("; the agent's proposals, one at a time, took longer than the benchmarks they fed: "
                 "more --parallel slots will not make this run faster")
    return text


def ways_forward(project: Project, target: str) -> str:
    """What to do when the agent has nothing to try: the three ways the loop gets proposals."""
    kernel = f"{project.target_rel(target)}/kernel.py"
    return ("autogk: the agent proposed nothing, so no experiment ran. The loop needs one of:\n"
            f"  1. tunables for the offline tuner: in {kernel}, mark module constants with the values to try,\n"
            "     e.g. `BLOCK = 128  # autogk: tune [64, 128, 256]`, commit, then: autogk iterate --agent tune\n"
            "  2. an LLM agent: export ANTHROPIC_API_KEY=..., then: autogk iterate --agent anthropic\n"
            "  3. your own command-line agent: set [agent] command = \"...\" in .autogk.toml (e.g. \"claude -p\"),\n"
            "     then: autogk iterate --agent command")


def update_old_shims(root, say) -> None:
    """autogk's hook shims from an older template (they started Python with the checkout's folder first on
    its path, where a folder named autogk_git ran as the hook) are rewritten before the loop runs; a project
    from before the reference-transaction hook gets it."""
    from autogk_git.git import hooks as hooks_mod
    from autogk_git.record import refs
    st = hooks_mod.status(root)
    if "outdated" in st.values():
        hooks_mod.install(root, refs.NOTES_GLOB)
        say("autogk: updated this repository's hook shims (the older ones ran Python from the checkout's top "
            "folder first)")
    elif st.get(hooks_mod.REF_HOOK) == "missing" and st.get("post-commit") == "installed":
        hooks_mod.install(root, refs.NOTES_GLOB)
        say("autogk: added the reference-transaction hook (a plain `git fetch` may no longer move this clone's "
            "experiment refs: `autogk sync` brings a remote's)")
