"""`autogk show N`: plan, diff, per-workload table."""
from __future__ import annotations

import json

import click

from autogk_git.record import ledger
from autogk_git.record import refs
from autogk_git.git import repo
from autogk_git.project import Project, find_root


def workload_table(result: dict) -> list[str]:
    lines = [f"{'stage':<7} {'workload':<10} {'status':<20} {'max_abs_err':>12} {'latency_us':>11} {'vs parent':>9}"]
    for stage, res in result.get("stages", {}).items():
        for uuid, w in res.get("workloads", {}).get("candidate", {}).items():
            lat = w.get("latency_us")
            ratio = w.get("ratio_vs_parent")
            lines.append(f"{stage:<7} {uuid[:8]:<10} {w['status']:<20} {w.get('max_abs_err', float('nan')):>12.4g} "
                         f"{(f'{lat:.2f}' if lat is not None else '-'):>11} "
                         f"{(f'{ratio:.3f}' if ratio is not None else '-'):>9}")
    for s in result.get("skipped", []):
        lines.append(f"{'-':<7} {s['uuid'][:8]:<10} {'skipped':<20} {s['reason']}")
    return lines


@click.command("show", help="One experiment: plan, diff and per-workload table.")
@click.argument("number", type=int)
@click.option("--target", "-t", help="target name, when several have this number")
@click.option("--json", "as_json", is_flag=True, help="print the result note's JSON")
def show(number, target, as_json) -> int:
    root = find_root()
    row = ledger.find(root, number, target)
    note = repo.read_note(root, refs.NOTES_RESULTS, row.commit)
    from autogk_git.record.notes import parse_result
    result = parse_result(note, row.commit) if note else None
    if as_json:
        click.echo(json.dumps({"row": row.as_dict(), "result": result}, indent=1, sort_keys=True))
        return 0
    ref = refs.ExperimentRef(row.target, row.number)
    where = {"kept": ref.kept_ref, "archived": ref.archive_ref}.get(row.state, "its branch (open)")
    click.echo(f"{row.target} #{row.number:04d}  {row.state}  {row.commit}  ({where})\n{row.hypothesis}\n")
    if result:
        v = result["verdict"]
        click.echo(f"verdict: {v['decision'].upper()} ({v.get('rule')}): {v.get('reason')}")
        if v.get("figures"):
            click.echo(f"figures: {v['figures']}")
        if result.get("timing_note"):
            click.echo(f"note: {result['timing_note']}")
    else:
        click.echo("no result note yet (benchmark pending)")
    plan = repo.read_note(root, refs.NOTES_PLANS, row.commit)
    if plan:
        click.echo("\n--- plan ---\n" + plan.strip())
    parent = (result or {}).get("parent") or f"{row.commit}^"
    click.echo("\n--- diff ---")
    click.echo(repo.diff(root, parent, row.commit, Project(root).target_rel(row.target)).rstrip() or "(no change)")
    if result:
        click.echo("\n--- workloads ---")
        for line in workload_table(result):
            click.echo(line)
        if row.latency_us is not None:
            click.echo(f"geomean latency {row.latency_us:.3f} us" +
                       (f", {row.ratio:.4f}x the parent's" if row.ratio is not None else ""))
    click.echo(f"\nreuse it elsewhere: autogk pick {row.number} --target {row.target} --onto BRANCH")
    return 0
