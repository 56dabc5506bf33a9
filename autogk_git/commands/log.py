"""`autogk log`: one line per experiment, filtered by target, verdict, state and time."""
from __future__ import annotations

import json

import click

from autogk_git.record import ledger
from autogk_git.project import find_root


# The listing prints HELD and VOID: a filter accepts what it printed as well as the decision's name.
VERDICT_ALIASES = {"held": "untimed", "void": "invalid"}


@click.command("log", help="One line per experiment: number, verdict, hypothesis, figures.")
@click.option("--target", "-t", help="only this target")
@click.option("--verdict", type=click.Choice(["keep", "revert", "held", "untimed", "invalid", "void", "pending"]),
              help="only this verdict (held = untimed, void = invalid: the words the listing prints)")
@click.option("--state", type=click.Choice(["kept", "archived", "held", "open"]), help="only experiments in this state")
@click.option("--since", help="only experiments since a date (2026-11-30), an ISO time, or a span (12h, 3d, 2w)")
@click.option("--limit", "-n", type=int, default=0, help="only the last N (after filtering)")
@click.option("--tree", is_flag=True, help="draw the search tree: each experiment under the node it branched from")
@click.option("--json", "as_json", is_flag=True, help="print a JSON array")
def log(target, verdict, state, since, limit, tree, as_json) -> int:
    root = find_root()
    when = ledger.parse_since(since) if since else None
    verdict = VERDICT_ALIASES.get(verdict, verdict)
    items = ledger.select(ledger.rows(root, target), verdict, when, state)
    if limit > 0:
        items = items[-limit:]
    if as_json:
        # One object per line: readable, and the C encoder (indent= is the slow pure-Python one).
        click.echo("[\n" + ",\n".join(json.dumps(r.as_dict()) for r in items) + "\n]" if items else "[]")
        return 0
    if not items:
        from autogk_git.record.sharing import empty_history_hint
        click.echo("no experiments match" if (target or verdict or state or since) else
                   empty_history_hint(root))
        return 0
    if tree:
        click.echo("\n".join(tree_lines(items)))
        return 0
    click.echo("\n".join(f"{r.target} {line(r)}" for r in items))
    return 0


def line(r: ledger.Row) -> str:
    mark = {"keep": "KEEP  ", "revert": "REVERT", "untimed": "HELD  ", "pending": "...   ",
            "invalid": "VOID  "}.get(r.decision, r.decision[:6])
    figs = f"  [{r.figures}]" if r.figures else ""
    near = f"  (floor: {r.floor_share:.1%} at worst)" if r.floor_share else ""
    where = "" if r.judged_here else "  (judged in another clone: its note was fetched)"
    return f"#{r.number:04d} {mark} {r.commit[:10]} {r.hypothesis}{figs}{near}{where}"


def tree_lines(items: list[ledger.Row]) -> list[str]:
    """Each target's experiments under the node they branched from; those from a trunk commit at the top."""
    out: list[str] = []
    for t in sorted({r.target for r in items}):
        rows = [r for r in items if r.target == t]
        by_commit = {r.commit: r for r in rows}
        kids: dict[str, list[ledger.Row]] = {}
        for r in rows:
            kids.setdefault(r.parent if r.parent in by_commit else "", []).append(r)
        out.append(f"{t}: experiments from the trunk, each under the node it branched from")

        def walk(key: str, prefix: str) -> None:
            children = kids.get(key, [])
            for i, r in enumerate(children):
                last = i == len(children) - 1
                frm = f" (from {r.parent[:10]})" if not key and r.parent else ""
                out.append(f"{prefix}{'`- ' if last else '|- '}{line(r)}{frm}")
                walk(r.commit, prefix + ("   " if last else "|  "))
        walk("", "")
    return out
