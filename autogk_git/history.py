"""Reading the experiment history back, in bulk: a handful of git processes however many experiments."""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from autogk_git import notes, refs
from autogk_git.git import repo


@dataclass
class Row:
    target: str
    number: int
    state: str            # kept | archived | open
    commit: str
    decision: str         # keep | revert | pending
    hypothesis: str
    figures: str
    reason: str
    agent: str
    backend: str
    created: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def rows(root, target: str | None = None, with_results: bool = False) -> list[Row] | tuple[list[Row], dict]:
    """Every experiment (of one target, or all), ordered by target and number."""
    found: dict[tuple[str, int], dict[str, str]] = {}
    for name, sha in repo.for_each_ref(root, refs.BRANCH_PREFIX, "refs/autogk/kept/", "refs/autogk/archive/"):
        parsed = refs.ExperimentRef.parse(name)
        if not parsed or (target and parsed[1].target != target):
            continue
        kind, ref = parsed
        rec = found.setdefault((ref.target, ref.number), {"state": "open", "commit": sha})
        if kind != "branch":
            rec.update(state="kept" if kind == "kept" else "archived", commit=sha)
    shas = [r["commit"] for r in found.values()]
    texts = repo.read_notes(root, refs.NOTES_RESULTS, shas)
    results = {c: notes.parse_result(t, c) for c, t in texts.items()}
    missing = [s for s in shas if not results.get(s)]
    subjects = {s: i["subject"] for s, i in repo.commit_info(root, missing).items()}
    out = []
    for (t, n), rec in sorted(found.items()):
        res = results.get(rec["commit"]) or {}
        v = res.get("verdict") or {}
        out.append(Row(t, n, rec["state"], rec["commit"], v.get("decision", "pending"),
                       res.get("hypothesis") or subjects.get(rec["commit"], ""), v.get("figures", ""),
                       v.get("reason", ""), res.get("agent", ""), res.get("backend", ""), res.get("created", "")))
    if with_results:
        return out, results
    return out


def find(root, number: int, target: str | None = None) -> Row:
    from autogk_git.errors import AutogkError
    matches = [r for r in rows(root, target) if r.number == number]
    if not matches:
        raise AutogkError(f"no experiment #{number}" + (f" for target {target}" if target else ""),
                          "list them with `autogk log`")
    if len(matches) > 1:
        raise AutogkError(f"experiment #{number} exists for several targets "
                          f"({', '.join(r.target for r in matches)})", "pass --target NAME")
    return matches[0]
