"""The run as a picture and a page: every experiment's figure, kept ones marked, best-so-far, per workload.

The only module that imports matplotlib (lazily, Agg backend: no display needed). On a timed history
the figure is latency; on an untimed one (the CPU interpreter) there is no latency to draw, and the
report draws what was measured instead (workloads passed per experiment, status per workload) and
says so rather than inventing a number.
"""
from __future__ import annotations

import datetime as dt
import html
import json
from pathlib import Path
from typing import Any

from autogk_git.bench.judge.status import Status
from autogk_git.record import ledger
from autogk_git.record.tally import Tally

STATUS_CODE = {s.value: code for s, code in ((Status.PASSED, 0), (Status.INCORRECT_NUMERICAL, 1),
                                             (Status.INCORRECT_SHAPE, 1), (Status.RUNTIME_ERROR, 2),
                                             (Status.COMPILE_ERROR, 2), (Status.TIMEOUT, 2))}


def per_workload(results: dict[str, dict], items: list[ledger.Row]) -> tuple[list[str], dict[int, dict[str, Any]]]:
    """(workload uuids in first-seen order, {experiment number: {uuid: {status, latency_us}}})."""
    order: list[str] = []
    table: dict[int, dict[str, Any]] = {}
    for r in items:
        res = results.get(r.commit) or {}
        lat = ledger.latencies(res)
        cells = {}
        for stage in (res.get("stages") or {}).values():
            for u, w in ((stage.get("workloads") or {}).get("candidate") or {}).items():
                cells[u] = {"status": w.get("status"), "latency_us": lat.get(u)}
                if u not in order:
                    order.append(u)
        table[r.number] = cells
    return order, table


def short_names(uuids: list[str]) -> dict[str, str]:
    """8-character labels; the last 8 when the first 8 do not tell the workloads apart."""
    heads = [u[:8] for u in uuids]
    use_tail = len(set(heads)) < len(heads)
    return {u: (u[-8:] if use_tail else u[:8]) for u in uuids}


def best_so_far(items: list[ledger.Row]) -> list[tuple[int, float]]:
    """(number, best kept geomean latency up to it) along the run."""
    out, cur = [], None
    for r in items:
        if r.decision == "keep" and r.latency_us is not None:
            cur = r.latency_us if cur is None else min(cur, r.latency_us)
        if cur is not None:
            out.append((r.number, cur))
    return out


def start_latency(items: list[ledger.Row], results: dict[str, dict]) -> float | None:
    """Geomean latency of the first experiment's parent, on the workloads the experiment timed."""
    first = next((r for r in items if r.latency_us is not None), None)
    res = results.get(first.commit) if first else None
    if not res:
        return None
    cand, parent = ledger.latencies(res), ledger.latencies(res, "parent")
    common = [u for u in cand if u in parent]
    return ledger.geomean([parent[u] for u in common]) if common and len(common) == len(cand) else None


COLORS = {"keep": "tab:green", "revert": "tab:red", "untimed": "tab:cyan", "invalid": "tab:purple", "pending": "0.6"}
NAMES = {"keep": "kept", "revert": "reverted", "untimed": "held untimed", "invalid": "invalid", "pending": "open"}


def never_why(never: list[str], results: dict[str, dict]) -> str:
    """Why workloads no experiment checked were not, in the verdicts' own words (loop/verdict.py)."""
    from autogk_git.loop.verdict import short_reason
    why: dict[str, str] = {}
    for res in results.values():
        for u in ((res.get("verdict") or {}).get("coverage") or {}).get("unchecked") or res.get("skipped") or []:
            why.setdefault(u["uuid"], short_reason(u["reason"]))
    groups: dict[str, int] = {}
    for u in never:
        key = why.get(u, "no experiment reached them")
        groups[key] = groups.get(key, 0) + 1
    return "; ".join(f"{n} {k}" for k, n in groups.items())


def change_label(r: ledger.Row, width: int = 30) -> str:
    """What an experiment changed, short enough for an axis: its hypothesis without the agent's prefix."""
    text = r.hypothesis.split(": ", 1)[1] if r.hypothesis.startswith(("tune: ", "anthropic: ", "command: ")) \
        else r.hypothesis
    text = " ".join(text.split()) or "(no description)"
    return text if len(text) <= width else text[:width - 1] + "…"


def _decision(r: ledger.Row) -> str:
    return r.decision if r.decision in COLORS else "pending"


def _legend(ax, present: set[str], extra: list | None = None) -> None:
    """A legend with only what the figure shows: no promise of a colour that cannot appear."""
    from matplotlib.patches import Patch
    handles = [Patch(color=COLORS[d], label=NAMES[d]) for d in COLORS if d in present] + (extra or [])
    if handles:
        ax.legend(handles=handles, fontsize=8, loc="best")


def draw(target: str, items: list[ledger.Row], results: dict[str, dict], png: Path,
         all_workloads: dict[str, str] | None = None, best_number: int | None = None) -> dict[str, Any]:
    """The figure. Timed: the objective's trajectory (every experiment, best so far) and per-workload
    latency. Untimed: what was checked, per experiment and per workload, including the workloads no
    experiment ran. Either way each experiment is labelled with its change and the best is starred.

    all_workloads: {uuid: a readable name (its axes)} of every workload of the target, in file order.
    """
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.ticker import MaxNLocator

    timed = any(r.latency_us is not None for r in items)
    order, table = per_workload(results, items)
    never = [u for u in (all_workloads or []) if u not in order]
    label = short_names(order + never)
    names = all_workloads or {}
    label = {u: (f"{names[u]} ({label[u]})" if names.get(u) else label[u]) for u in label}
    by_number = {r.number: r for r in items}
    best = by_number.get(best_number) if best_number is not None else None
    present = {_decision(r) for r in items}
    many = len(items) > 30  # past that, only kept experiments carry their change as a label
    tally = Tally.of(r.decision for r in items)
    summary: dict[str, Any] = {"experiments": len(items), **tally.as_dict(), "counts": tally.words(), "timed": timed,
                               "workloads": len(order) + len(never), "workloads_checked": len(order),
                               "workloads_never_checked": len(never)}
    if best is not None:
        summary["best_experiment"] = best.number
    # Which experiments carry their change as a label on the figure (all of them up to 30).
    summary["labelled"] = {str(r.number): change_label(r) for r in items if not many or r.decision == "keep"}
    star = [Line2D([], [], marker="*", color="gold", markeredgecolor="k", linestyle="", markersize=12,
                   label=f"best: #{best.number} {change_label(best)}")] if best else []
    rows_needed = len(order) + len(never)
    fig, (ax, ax2) = plt.subplots(2, 1, figsize=(11, 8.5 + 0.12 * max(0, rows_needed - 12)),
                                  gridspec_kw={"height_ratios": [3, 2]})
    if timed:
        start = start_latency(items, results)
        if start is not None:  # the trunk's kernel before the first experiment: where the objective began
            ax.scatter([0], [start], color="k", marker="D", zorder=3)
            ax.annotate("start", (0, start), textcoords="offset points", xytext=(4, 4), fontsize=7)
            summary["start_latency_us"] = start
        for r in items:
            if r.latency_us is None:
                continue
            d = _decision(r)
            ax.scatter([r.number], [r.latency_us], color=COLORS[d], marker="o" if d == "keep" else "x", zorder=3)
            if not many or d == "keep":
                ax.annotate(change_label(r, 24), (r.number, r.latency_us), textcoords="offset points",
                            xytext=(4, 4), fontsize=6.5, rotation=25, color="0.25")
        bsf = best_so_far(items)
        if start is not None:
            bsf = [(0, start)] + [(n, min(v, start)) for n, v in bsf]
        extra = []
        if bsf:
            ax.step(*zip(*bsf), where="post", color="tab:blue")
            extra.append(Line2D([], [], color="tab:blue", label="best so far (kept)"))
            summary["best_latency_us"] = bsf[-1][1]
            first = next((r.latency_us for r in items if r.latency_us is not None), None)
            if first:
                summary["best_vs_first"] = bsf[-1][1] / first
            if start:
                summary["best_vs_start"] = bsf[-1][1] / start
        if best is not None and best.latency_us is not None:
            ax.scatter([best.number], [best.latency_us], marker="*", s=260, color="gold", edgecolor="k", zorder=4)
        ax.margins(x=0.06, y=0.18)
        timed_wl = len({u for c in table.values() for u, w in c.items() if w.get("latency_us")})
        ax.set_title(f"autogk {target}: the objective over {len(items)} experiment(s)\n"
                     f"geomean latency over the {timed_wl} timed workload(s); {len(order)} of "
                     f"{len(order) + len(never)} workload(s) ran in some experiment", fontsize=10)
        ax.set_ylabel("geomean latency (us), lower is better")
        _legend(ax, present, extra + star)
        first = next((r for r in items if r.latency_us is not None), None)
        parent0 = ledger.latencies(results.get(first.commit) or {}, "parent") if first and start is not None else {}
        for u in order:
            pts = [(n, c[u]["latency_us"]) for n, c in sorted(table.items()) if c.get(u, {}).get("latency_us")]
            if pts and u in parent0:
                pts = [(0, parent0[u])] + pts
            if pts:
                ax2.plot(*zip(*pts), marker=".", label=label[u])
        # Latencies span decades (microsecond decode to millisecond prefill): a log axis keeps every
        # workload's trajectory readable, and the legend goes below the axes, never over the lines.
        ax2.set_yscale("log")
        from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter
        ax2.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax2.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax2.yaxis.set_minor_formatter(NullFormatter())
        ax2.set_ylabel("latency per workload (us, log)")
        ax2.set_title("per-workload latency of every experiment", fontsize=9)
        if order:
            ax2.legend(fontsize=6.5, ncol=3, loc="upper center", bbox_to_anchor=(0.5, -0.2), frameon=False)
    else:
        xs = [r.number for r in items]
        passed = [sum(1 for c in table[r.number].values() if c["status"] == Status.PASSED.value) for r in items]
        checked = [len(table[r.number]) for r in items]
        ax.bar(xs, checked, color="0.88", edgecolor="0.6", width=0.6)
        ax.bar(xs, passed, color=[COLORS[_decision(r)] for r in items], width=0.6)
        top = max(checked or [1])
        if not many:  # each bar carries its change under it
            ax.set_xticks(xs, [f"#{r.number}\n{change_label(r, 28 if len(items) <= 6 else 22)}" for r in items],
                          fontsize=7 if len(items) <= 12 else 6, rotation=0 if len(items) <= 8 else 45,
                          ha="center" if len(items) <= 8 else "right")
        if best is not None:
            y = checked[xs.index(best.number)] + top * 0.08
            ax.scatter([best.number], [y], marker="*", s=300, color="gold", edgecolor="k", zorder=4)
            ax.annotate("best", (best.number, y), textcoords="offset points", xytext=(0, 9), ha="center",
                        fontsize=8)
        ax.set_ylim(0, top * 1.45)
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylabel("workloads (grey: checked, colour: passed)")
        total = len(order) + len(never)
        ax.set_title(f"autogk {target}: correctness only (untimed backend, no latency measured)\n"
                     f"{len(order)} of {total} workload(s) checked by some experiment"
                     + (f"; {len(never)} never checked" if never else ""), fontsize=10)
        from matplotlib.patches import Patch
        _legend(ax, present, [Patch(facecolor="0.88", edgecolor="0.6", label="checked")] + star)
        rows_u = order + never
        grid = [[STATUS_CODE.get(table[r.number].get(u, {}).get("status"), -1) for r in items] for u in rows_u]
        if grid and items:
            from matplotlib.colors import ListedColormap
            ax2.imshow(grid, aspect="auto", cmap=ListedColormap(["white", "tab:green", "tab:red", "black"]),
                       vmin=-1.5, vmax=2.5, extent=(min(xs) - 0.5, max(xs) + 0.5, len(rows_u) - 0.5, -0.5))
            ax2.set_yticks(range(len(rows_u)), [label[u] + (" (never)" if u in never else "") for u in rows_u],
                           fontsize=6 if len(rows_u) > 20 else 7)
        ax2.set_ylabel("workload status\n(green pass, red wrong,\nblack error, white unchecked)", fontsize=8)
        summary["passed_last"] = passed[-1] if passed else 0
    if never:
        summary["never_why"] = never_why(never, results)
    for a in (ax, ax2):
        a.set_xlabel("experiment" + (" (0: the trunk's kernel before the first)" if timed and a is ax2 else ""))
        if a is ax2 or timed or many:
            a.xaxis.set_major_locator(MaxNLocator(integer=True))
    if timed:
        ax2.set_xlim(ax.get_xlim())
    fig.tight_layout()
    fig.savefig(png, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return summary


def page(target: str, items: list[ledger.Row], png_name: str, summary: dict[str, Any], best_line: str) -> str:
    def cell(x: Any) -> str:
        return f"<td>{html.escape(str(x))}</td>"
    best = summary.get("best_experiment")
    rows_html = []
    for r in items:
        lat = f"{r.latency_us:.3f}" if r.latency_us is not None else "-"
        ratio = f"{r.ratio:.3f}" if r.ratio is not None else "-"
        near = f"{r.floor_share:.1%}" if r.floor_share else "-"
        cls = {"keep": "keep", "revert": "revert", "untimed": "held"}.get(r.decision, "pending")
        verdict = r.decision.upper() + (" ★ best" if r.number == best else "") + \
            ("" if r.judged_here else " (judged in another clone: its note was fetched)")
        rows_html.append(f'<tr class="{cls}">' + "".join(cell(x) for x in (
            f"#{r.number:04d}", r.state, verdict, r.commit[:10], r.hypothesis, r.reason or "-", r.figures, lat, ratio, near))
            + "</tr>")
    if summary["timed"]:
        note = ""
    else:
        never = summary.get("workloads_never_checked", 0)
        note = ("<p><b>No latency was measured</b> (untimed backend): the verdicts rest on correctness alone, "
                f"and the figure shows what was checked: {summary.get('workloads_checked', 0)} of "
                f"{summary.get('workloads', 0)} workload(s) ran in some experiment"
                + (f"; {never} never ran ({summary.get('never_why') or 'no experiment reached them'})"
                   if never else "")
                + ".</p>")
    counts = summary["counts"] + "."
    fetched = summary.get("judged_elsewhere", 0)
    if fetched:
        counts += (f" {fetched} of {len(items)} judged in another clone (their result notes were fetched; "
                   "`autogk iterate` benchmarks such an experiment here before it concludes or merges).")
    when = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>autogk report: {html.escape(target)}</title>
<style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:2px 6px;font-size:13px}}tr.keep{{background:#e6f4e6}}
tr.revert{{background:#fbeaea}}tr.held{{background:#e6f4f8}}</style></head><body>
<h1>autogk report: {html.escape(target)}</h1>
<p>{html.escape(counts)} {html.escape(best_line)}</p>{note}
<img src="{html.escape(png_name)}" alt="figure of every experiment" style="max-width:100%">
<table><tr><th>experiment</th><th>state</th><th>verdict</th><th>commit</th><th>change</th><th>why (verdict reason)</th>
<th>figures</th><th>geomean latency (us)</th><th>ratio vs parent</th><th>share of floor (lowest workload)</th></tr>
{chr(10).join(rows_html)}
</table><p><small>generated {when} by autogk report</small></p></body></html>
"""


def build(project, target: str, out_dir: Path) -> dict[str, Any]:
    """Write <out_dir>/<target>.png and .html; returns their paths and the summary figures."""
    items, results = ledger.rows(project.root, target, with_results=True)
    items = [r for r in items if r.target == target]
    out_dir.mkdir(parents=True, exist_ok=True)
    png, page_path = out_dir / f"{target}.png", out_dir / f"{target}.html"
    best = [b for b in ledger.best(project.root, project.trunk, target) if b.target == target]
    try:
        all_workloads = {w["uuid"]: ", ".join(f"{k}={v}" for k, v in (w.get("axes") or {}).items())
                         for w in project.target(target).workloads}
    except Exception:  # noqa: BLE001 - a target folder gone from the checkout still has its history drawn
        all_workloads = {}
    summary = draw(target, items, results, png, all_workloads,
                   best[0].row.number if best and best[0].row else None)
    summary["judged_elsewhere"] = sum(1 for r in items if not r.judged_here)
    best_line = (f"Best: #{best[0].row.number:04d} {best[0].row.hypothesis} ({best[0].basis})." if best and best[0].row
                 else f"No best: {best[0].basis}." if best else "No best: no experiment yet.")
    page_path.write_text(page(target, items, png.name, summary, best_line))
    (out_dir / f"{target}.json").write_text(json.dumps([r.as_dict() for r in items], indent=1))
    return {"target": target, "png": str(png), "html": str(page_path), "summary": summary}
