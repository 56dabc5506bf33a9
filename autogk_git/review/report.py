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

from autogk_git.record import ledger

STATUS_CODE = {"PASSED": 0, "INCORRECT_NUMERICAL": 1, "INCORRECT_SHAPE": 1, "RUNTIME_ERROR": 2,
               "COMPILE_ERROR": 2, "TIMEOUT": 2}


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


def draw(target: str, items: list[ledger.Row], results: dict[str, dict], png: Path) -> dict[str, Any]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    timed = any(r.latency_us is not None for r in items)
    order, table = per_workload(results, items)
    label = short_names(order)
    fig, (ax, ax2) = plt.subplots(2, 1, figsize=(10, 7.5), gridspec_kw={"height_ratios": [3, 2]})
    kept = [r for r in items if r.decision == "keep"]
    other = [r for r in items if r.decision != "keep"]
    summary: dict[str, Any] = {"experiments": len(items), "kept": len(kept), "timed": timed}
    if timed:
        for group, style in ((other, dict(marker="x", color="0.55", label="reverted / pending")),
                             (kept, dict(marker="o", color="tab:green", label="kept"))):
            pts = [(r.number, r.latency_us) for r in group if r.latency_us is not None]
            if pts:
                ax.scatter(*zip(*pts), zorder=3, **style)
        bsf = best_so_far(items)
        if bsf:
            ax.step(*zip(*bsf), where="post", color="tab:blue", label="best so far (kept)")
            summary["best_latency_us"] = bsf[-1][1]
        ax.set_ylabel("geomean latency (us)")
        ax.set_title(f"autogk {target}: latency of every experiment")
        for u in order:
            pts = [(n, c[u]["latency_us"]) for n, c in sorted(table.items()) if c.get(u, {}).get("latency_us")]
            if pts:
                ax2.plot(*zip(*pts), marker=".", label=label[u])
        ax2.set_ylabel("latency per workload (us)")
        if order:
            ax2.legend(fontsize=7, ncol=4)
    else:
        xs = [r.number for r in items]
        passed = [sum(1 for c in table[r.number].values() if c["status"] == "PASSED") for r in items]
        checked = [len(table[r.number]) for r in items]
        colors = ["tab:green" if r.decision == "keep" else "tab:red" if r.decision == "revert" else "0.6"
                  for r in items]
        ax.bar(xs, checked, color="0.85", label="workloads checked")
        ax.bar(xs, passed, color=colors, label="passed (green: kept, red: reverted)")
        ax.set_ylabel("workloads")
        ax.set_title(f"autogk {target}: no latency measured (untimed backend), correctness per experiment")
        grid = [[STATUS_CODE.get(table[r.number].get(u, {}).get("status"), -1) for r in items] for u in order]
        if grid and items:
            from matplotlib.colors import ListedColormap
            ax2.imshow(grid, aspect="auto", cmap=ListedColormap(["white", "tab:green", "tab:red", "black"]),
                       vmin=-1.5, vmax=2.5, extent=(min(xs) - 0.5, max(xs) + 0.5, len(order) - 0.5, -0.5))
            ax2.set_yticks(range(len(order)), [label[u] for u in order], fontsize=7)
        ax2.set_ylabel("workload status\n(green pass, red wrong,\nblack error, white unchecked)", fontsize=8)
        summary["passed_last"] = passed[-1] if passed else 0
    for r in kept:
        ax.annotate("kept", (r.number, ax.get_ylim()[1]), textcoords="offset points", xytext=(0, -10),
                    ha="center", fontsize=7, color="tab:green")
    from matplotlib.ticker import MaxNLocator
    for a in (ax, ax2):
        a.set_xlabel("experiment")
        a.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)
    return summary


def page(target: str, items: list[ledger.Row], png_name: str, summary: dict[str, Any], best_line: str) -> str:
    def cell(x: Any) -> str:
        return f"<td>{html.escape(str(x))}</td>"
    rows_html = []
    for r in items:
        lat = f"{r.latency_us:.3f}" if r.latency_us is not None else "-"
        ratio = f"{r.ratio:.3f}" if r.ratio is not None else "-"
        cls = {"keep": "keep", "revert": "revert"}.get(r.decision, "pending")
        rows_html.append(f'<tr class="{cls}">' + "".join(cell(x) for x in (
            f"#{r.number:04d}", r.state, r.decision.upper(), r.commit[:10], r.hypothesis, r.figures, lat, ratio))
            + "</tr>")
    note = ("" if summary["timed"] else
            "<p><b>No latency was measured</b> (untimed backend): the figure shows correctness per experiment.</p>")
    when = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>autogk report: {html.escape(target)}</title>
<style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:2px 6px;font-size:13px}}tr.keep{{background:#e6f4e6}}
tr.revert{{background:#fbeaea}}</style></head><body>
<h1>autogk report: {html.escape(target)}</h1>
<p>{summary['experiments']} experiment(s), {summary['kept']} kept. {html.escape(best_line)}</p>{note}
<img src="{html.escape(png_name)}" alt="figure of every experiment" style="max-width:100%">
<table><tr><th>experiment</th><th>state</th><th>verdict</th><th>commit</th><th>hypothesis</th><th>figures</th>
<th>geomean latency (us)</th><th>ratio vs parent</th></tr>
{chr(10).join(rows_html)}
</table><p><small>generated {when} by autogk report</small></p></body></html>
"""


def build(project, target: str, out_dir: Path) -> dict[str, Any]:
    """Write <out_dir>/<target>.png and .html; returns their paths and the summary figures."""
    items, results = ledger.rows(project.root, target, with_results=True)
    items = [r for r in items if r.target == target]
    out_dir.mkdir(parents=True, exist_ok=True)
    png, page_path = out_dir / f"{target}.png", out_dir / f"{target}.html"
    summary = draw(target, items, results, png)
    best = [b for b in ledger.best(project.root, project.trunk, target) if b.target == target]
    best_line = (f"Best: #{best[0].row.number:04d} {best[0].row.hypothesis} ({best[0].basis})."
                 if best and best[0].row else "Nothing kept yet.")
    page_path.write_text(page(target, items, png.name, summary, best_line))
    (out_dir / f"{target}.json").write_text(json.dumps([r.as_dict() for r in items], indent=1))
    return {"target": target, "png": str(png), "html": str(page_path), "summary": summary}
