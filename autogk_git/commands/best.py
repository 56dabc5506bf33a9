"""`autogk best`: the best kept kernel of each target, with its figures and how "best" was decided."""
from __future__ import annotations

import json

import click

from autogk_git.record import ledger
from autogk_git.project import Project


@click.command("best", help="The best kept kernel per target, with its figures.")
@click.option("--target", "-t", help="only this target")
@click.option("--json", "as_json", is_flag=True, help="print JSON")
def best(target, as_json) -> int:
    project = Project.find()
    found = ledger.best(project.root, project.trunk, target)
    if as_json:
        click.echo(json.dumps([b.as_dict() for b in found], indent=1))
        return 0
    if not found:
        click.echo("no experiments yet: run `autogk iterate`")
        return 0
    for b in found:
        if b.row is None:
            click.echo(f"{b.target}: {b.basis}")
            continue
        r = b.row
        click.echo(f"{b.target}: #{r.number:04d} {r.commit[:10]} {r.hypothesis}")
        click.echo(f"  on {project.trunk} as {b.trunk_commit[:10]}; {b.kept_on_trunk} experiment(s) kept there")
        if r.figures:
            click.echo(f"  figures: {r.figures}")
        click.echo(f"  judged: {r.coverage}" + ("" if r.judged_here else
                   f"; in another clone (its note was fetched): `autogk bench --rev {r.commit[:10]}` judges it here"))
        if r.latency_us is not None:
            click.echo(f"  geomean latency: {r.latency_us:.3f} us" +
                       (f"; {b.speedup_vs_start:.3f}x faster than the trunk's start (product of the kept experiments' "
                        "objective ratios, each judged on every workload)" if b.speedup_vs_start else ""))
            for uuid, lat in sorted(b.workloads.items()):
                click.echo(f"    {uuid}  {lat:10.3f} us")
        click.echo(f"  best means: {b.basis}")
        click.echo(f"  see it: autogk show {r.number} --target {b.target}   pack it: autogk pack {b.trunk_commit[:10]}")
    return 0
