"""`autogk bench`: run the stages on one revision's kernel, outside any experiment."""
from __future__ import annotations

import json
from typing import Any

import click

from autogk_git.errors import AutogkError
from autogk_git.record import refs
from autogk_git.git import repo
from autogk_git.project import Project, Target


def check_kernel(project: Project, target: Target, rev: str, say, backend_name: str | None = None,
                 parent: str | None = None) -> dict[str, Any]:
    from autogk_git.bench.backends import get_backend
    from autogk_git.bench.stages import benchmark
    from autogk_git.loop.verdict import first_failure

    from autogk_git.project import require_input_data
    require_input_data(target)
    sha = repo.rev(project.root, rev)
    if not sha:
        raise AutogkError(f"'{rev}' is not a commit", "pass a branch, tag or sha")
    backend = get_backend(backend_name or project.config.bench.backend, project.config)
    say(f"checking {target.name} at {sha[:10]} on the {backend.name} backend")
    from autogk_git.record.kernels import sources_at
    parent_sources = sources_at(project.root, target, parent) if parent else None
    res = benchmark(target, backend, sources_at(project.root, target, sha), parent_sources, project.config,
                    seed=int(sha[:8], 16), progress=say)
    fail = first_failure(res)
    res["commit"] = sha
    n = len(res.get("checked_workloads", []))
    if fail:
        say(f"INCORRECT in {fail[0]} on workload {fail[1][:8]}: {fail[2][:300]}")
    elif res.get("error"):
        say(f"not checked: {res['error']}")
    else:
        extra = "" if res["timing"] else " (no timing on this backend)"
        say(f"correct on {n} workload(s){extra}; skipped {len(res.get('skipped', []))} for size")
    return res


@click.command("bench", help="Benchmark a kernel (the trunk's by default) without an experiment.")
@click.option("--target", "-t", help="target name")
@click.option("--rev", default=None, help="revision to benchmark (default: the trunk)")
@click.option("--against", default=None, help="time against this revision too (GPU backends)")
@click.option("--backend", type=click.Choice(["auto", "interpret", "local", "modal"]), help="override [bench] backend")
@click.option("--json", "as_json", is_flag=True, help="print the result JSON")
def bench(target, rev, against, backend, as_json) -> int:
    project = Project.find()
    t = project.target(target)
    say = (lambda s: click.echo(s, err=True)) if as_json else click.echo
    rev = rev or (project.trunk if repo.rev(project.root, refs.branch(project.trunk)) else "HEAD")
    res = check_kernel(project, t, rev, say, backend, against)
    if as_json:
        click.echo(json.dumps(res, indent=1, sort_keys=True))
    return 0 if res.get("correct") else 1
