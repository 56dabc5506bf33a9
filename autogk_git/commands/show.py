"""`autogk show N`: plan, diff, per-workload table."""
from __future__ import annotations

import json

import click

from autogk_git.record import floor, ledger
from autogk_git.record import refs
from autogk_git.git import repo
from autogk_git.project import Project, find_root


def workload_table(result: dict, axes: dict | None = None) -> list[str]:
    """One line per workload and stage; workloads named by their axes (from the note, else `axes`)."""
    from autogk_git.bench.job import workload_label
    v = result.get("verdict") or {}
    per_wl = {w["uuid"]: w for w in v.get("per_workload") or []}
    axes = result.get("workload_axes") or axes or {}
    names = {u: workload_label(u, axes) for u in {*axes, *(x for st in result.get("stages", {}).values()
                                                           for x in st.get("workloads", {}).get("candidate", {})),
                                                  *(u["uuid"] for u in unjudged(result))}}
    wide = max([10, *(len(n) + 1 for n in names.values())])
    lines = [f"{'stage':<7} {'workload':<{wide}} {'status':<20} {'max_abs_err':>12} {'latency_us':>11} {'vs parent':>9}"
             f"  {'interval':<17}"]
    for stage, res in result.get("stages", {}).items():
        for uuid, w in res.get("workloads", {}).get("candidate", {}).items():
            lat = w.get("latency_us")
            ratio = w.get("ratio_vs_parent")
            iv = per_wl.get(uuid) if stage == "ab" else None
            interval = f"[{iv['ci_low']:.3f}, {iv['ci_high']:.3f}]" if iv else ""
            # A workload the CPU interpreter checked on one N(0,1) set (backends/interpret.py): said here.
            status = w["status"] + (" (1 set)" if w.get("extra_checks") else "")
            lines.append(f"{stage:<7} {names[uuid]:<{wide}} {status:<20} {w.get('max_abs_err', float('nan')):>12.4g} "
                         f"{(f'{lat:.2f}' if lat is not None else '-'):>11} "
                         f"{(f'{ratio:.3f}' if ratio is not None else '-'):>9}  {interval}".rstrip())
    for u in unjudged(result):
        lines.append(f"{'-':<7} {names[u['uuid']]:<{wide}} {u['kind']:<20} {u['reason']}")
    return lines


def unjudged(result: dict) -> list[dict]:
    """Workloads the verdict does not rest on, each with why: not checked (e.g. over [bench] cpu_max_numel,
    or never reached), or checked but not timed against the parent."""
    cov = (result.get("verdict") or {}).get("coverage") or {}
    out, seen = [], set()
    for u in cov.get("unchecked") or result.get("skipped", []):
        out.append({"uuid": u["uuid"], "kind": "not checked", "reason": u["reason"]})
        seen.add(u["uuid"])
    for u in cov.get("untimed", []):
        if u["uuid"] not in seen:
            out.append({"uuid": u["uuid"], "kind": "not timed", "reason": u["reason"]})
    return out


def target_axes(root, target: str) -> dict:
    """{uuid: axes} of the target's workloads in the checkout, for notes written before they carried them."""
    try:
        return {w["uuid"]: w.get("axes") or {} for w in Project(root).target(target).workloads}
    except Exception:  # noqa: BLE001 - a target gone from the checkout: its workloads keep their uuids
        return {}


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
    where = {"kept": ref.kept_ref, "archived": ref.archive_ref, "held": ref.untimed_ref}.get(row.state,
                                                                                            "its branch (open)")
    click.echo(f"{row.target} #{row.number:04d}  {row.state}  {row.commit}  ({where})\n{row.hypothesis}\n")
    if result and not row.judged_here:
        click.echo(f"judged in another clone: its result note was fetched, not written here (`autogk bench --rev "
                   f"{row.commit[:10]}` judges it on this machine)")
    if result:
        v = result["verdict"]
        click.echo(f"verdict: {v['decision'].upper()} ({v.get('rule')}): {v.get('reason')}")
        if v.get("figures"):
            click.echo(f"figures: {v['figures']}")
        against = result.get("against")
        if against and against != result.get("parent"):
            click.echo(f"branched from: {str(result.get('parent'))[:10]} (a search node); timed against the trunk at "
                       f"{against[:10]}")
        drift = v.get("parent_drift")
        if isinstance(drift, dict) and drift.get("ratio"):
            w = drift.get("worst") if isinstance(drift.get("worst"), dict) else {}
            click.echo(f"the parent against its own keep: {drift['ratio']:.4f}x its latency then "
                       f"({str(drift.get('kept_commit'))[:10]}, {drift.get('workloads')} workload(s)"
                       + (f"; at most {w['ratio']:.4f}x, on {str(w.get('uuid'))[:8]}" if w.get("ratio") else "")
                       + f"; limit {1 + float(drift.get('limit', 0)):.2f}x on each)"
                       + (f"; the candidate {drift['candidate_vs_then']:.4f}x the parent then"
                          if isinstance(drift.get("candidate_vs_then"), (int, float)) else ""))
        near = floor.line(result.get("floor") or floor.of(result), v.get("workload_axes") or None)
        if near:
            trunk_near = floor.line(result.get("floor") or floor.of(result), label="parent")
            click.echo(f"limit: {near}" + (f"; the parent: {trunk_near}" if trunk_near else ""))
        cov = v.get("coverage")
        if cov:
            click.echo(f"judged on: {cov.get('checked', 0)} of {cov.get('total', 0)} workloads checked"
                       + (f", {cov['timed']} timed against the parent" if "timed" in cov else "")
                       + ("" if cov.get("complete") else " (not every workload: see the table)"))
        else:
            click.echo("judged on: not recorded (an older result; it may rest on a subset of the workloads)")
        if v.get("decision") == "untimed":
            ref = refs.ExperimentRef(row.target, row.number).untimed_ref
            click.echo(f"held: {ref}; time it on a GPU: autogk bench --rev {ref} --against {(result.get('parent') or '')[:10]} "
                       "--backend local")
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
        for line in workload_table(result, target_axes(root, row.target)):
            click.echo(line)
        if row.latency_us is not None:
            click.echo(f"geomean latency {row.latency_us:.3f} us" +
                       (f", {row.ratio:.4f}x the parent's" if row.ratio is not None else ""))
    click.echo(f"\nreuse it elsewhere: autogk pick {row.number} --target {row.target} --onto BRANCH")
    return 0
