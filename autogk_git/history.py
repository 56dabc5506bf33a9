"""Reading the experiment history back, in bulk: a handful of git processes however many experiments.

`rows` lists every experiment (refs + result notes); `best` picks the best kept kernel of a target;
the figure helpers read latencies and ratios out of a result note whether or not it was timed.
"""
from __future__ import annotations

import datetime as dt
import math
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from autogk_git import notes, refs
from autogk_git.git import repo
from autogk_git.git.run import git


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
    parent: str = ""
    timed: bool = False
    latency_us: float | None = None     # geometric mean of the candidate's latencies, when timed
    ratio: float | None = None          # candidate/parent geomean latency ratio, when timed

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# ------------------------------------------------------------------------------------------------
# Figures out of one result note (timed or not)
# ------------------------------------------------------------------------------------------------

def _num(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def geomean(values: list[float]) -> float | None:
    vals = [v for v in values if _num(v) and v > 0]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else None


def latencies(result: dict[str, Any], label: str = "candidate") -> dict[str, float]:
    """{workload uuid: latency_us} of one label, from the most paired stage that has any."""
    stages = result.get("stages") or {}
    for name in ("ab", "stride", *stages):
        wls = ((stages.get(name) or {}).get("workloads") or {}).get(label) or {}
        lat = {u: float(w["latency_us"]) for u, w in wls.items() if _num(w.get("latency_us"))}
        if lat:
            return lat
    return {}


RATIO_KEYS = ("geomean_ratio", "ratio", "ratio_geomean", "ratio_median")


def ratio_vs_parent(result: dict[str, Any]) -> float | None:
    """Candidate/parent geomean latency ratio: the verdict's figure when it has one, else computed."""
    v = result.get("verdict") or {}
    for k in RATIO_KEYS:
        if _num(v.get(k)):
            return float(v[k])
    ab = (((result.get("stages") or {}).get("ab") or {}).get("workloads") or {}).get("candidate") or {}
    r = geomean([w.get("ratio_vs_parent") for w in ab.values()])
    if r is not None:
        return r
    cand, par = latencies(result), latencies(result, "parent")
    common = [u for u in cand if u in par and par[u] > 0]
    return geomean([cand[u] / par[u] for u in common]) if common else None


# ------------------------------------------------------------------------------------------------
# Every experiment
# ------------------------------------------------------------------------------------------------

def rows(root, target: str | None = None, with_results: bool = False) -> list[Row] | tuple[list[Row], dict]:
    """Every experiment (of one target, or all), ordered by target and number."""
    found: dict[tuple[str, int], dict[str, str]] = {}
    for name, sha in repo.for_each_ref(root, refs.BRANCH_PREFIX, refs.KEPT_PREFIX, refs.ARCHIVE_PREFIX):
        parsed = refs.ExperimentRef.parse(name)
        if not parsed or (target and parsed[1].target != target):
            continue
        kind, ref = parsed
        rec = found.setdefault((ref.target, ref.number), {"state": "open", "commit": sha})
        if kind != "branch":
            rec.update(state="kept" if kind == "kept" else "archived", commit=sha)
    shas = [r["commit"] for r in found.values()]
    texts = repo.read_notes(root, refs.NOTES_RESULTS, shas)
    results = {c: notes.parse_result(t) for c, t in texts.items()}
    missing = [s for s in shas if not results.get(s)]
    info = repo.commit_info(root, missing)
    out = []
    for (t, n), rec in sorted(found.items()):
        res = results.get(rec["commit"]) or {}
        v = res.get("verdict") or {}
        lat = latencies(res) if res else {}
        ci = info.get(rec["commit"], {})
        out.append(Row(t, n, rec["state"], rec["commit"], v.get("decision", "pending"),
                       res.get("hypothesis") or ci.get("subject", ""), v.get("figures", ""),
                       v.get("reason", ""), res.get("agent", ""), res.get("backend", ""),
                       res.get("created") or ci.get("date", ""), res.get("parent") or "",
                       bool(res.get("timing")), geomean(list(lat.values())),
                       ratio_vs_parent(res) if res else None))
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


_REL = re.compile(r"^(\d+)\s*([mhdw])$")


def parse_since(text: str, now: dt.datetime | None = None) -> dt.datetime:
    """`2026-11-30`, an ISO time, or a span back from now: `90m`, `12h`, `3d`, `2w`."""
    from autogk_git.errors import AutogkError
    now = now or dt.datetime.now(dt.timezone.utc)
    m = _REL.match(text.strip())
    if m:
        unit = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}[m[2]]
        return now - dt.timedelta(**{unit: int(m[1])})
    try:
        when = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise AutogkError(f"cannot read --since {text!r}",
                          "give a date (2026-11-30), an ISO time, or a span such as 90m, 12h, 3d, 2w") from None
    return when if when.tzinfo else when.replace(tzinfo=dt.timezone.utc)


def created_at(row: Row) -> dt.datetime | None:
    try:
        when = dt.datetime.fromisoformat(row.created)
    except (TypeError, ValueError):
        return None
    return when if when.tzinfo else when.replace(tzinfo=dt.timezone.utc)


def select(items: list[Row], verdict: str | None = None, since: dt.datetime | None = None,
           state: str | None = None) -> list[Row]:
    out = []
    for r in items:
        if verdict and r.decision != verdict:
            continue
        if state and r.state != state:
            continue
        if since is not None:
            when = created_at(r)
            if when is None or when < since:
                continue
        out.append(r)
    return out


# ------------------------------------------------------------------------------------------------
# The trunk and the best kept kernel
# ------------------------------------------------------------------------------------------------

def trunk_merges(root: Path, trunk: str) -> dict[str, str]:
    """{merged commit: merge commit on the trunk's first-parent line}, in one git process."""
    if not repo.rev(root, f"refs/heads/{trunk}"):
        return {}
    out = git("log", "--first-parent", "--merges", "--format=%H %P", f"refs/heads/{trunk}", cwd=root)
    merged = {}
    for line in out.splitlines():
        parts = line.split()
        for p in parts[2:]:
            merged.setdefault(p, parts[0])
    return merged


@dataclass
class Best:
    target: str
    basis: str                   # how "best" was decided, in words
    row: Row | None              # the best kept experiment (None: nothing kept yet)
    trunk_commit: str | None     # the merge that put it on the trunk
    kept_on_trunk: int = 0
    workloads: dict[str, float] = field(default_factory=dict)   # per-workload latency_us, when timed
    speedup_vs_start: float | None = None   # product of kept ratios along the trunk, when timed

    def as_dict(self) -> dict[str, Any]:
        return {"target": self.target, "basis": self.basis, "experiment": self.row.as_dict() if self.row else None,
                "trunk_commit": self.trunk_commit, "kept_on_trunk": self.kept_on_trunk,
                "workloads_latency_us": self.workloads, "speedup_vs_start": self.speedup_vs_start}


def best(root: Path, trunk: str, target: str | None = None) -> list[Best]:
    """The best kept kernel of each target (see `Best.basis` for what "best" meant)."""
    items, results = rows(root, target, with_results=True)
    merged = trunk_merges(root, trunk)
    by_target: dict[str, list[Row]] = {}
    for r in items:
        by_target.setdefault(r.target, []).append(r)
    out = []
    for t, rs in sorted(by_target.items()):
        on_trunk = [r for r in rs if r.state == "kept" and r.commit in merged]
        if not on_trunk:
            out.append(Best(t, f"nothing kept on '{trunk}' yet: the trunk's kernel is the starting one", None, None))
            continue
        timed = [r for r in on_trunk if r.timed and latencies(results.get(r.commit) or {})]
        if timed:
            lats = {r.commit: latencies(results[r.commit]) for r in timed}
            common = set.intersection(*(set(v) for v in lats.values()))
            if common:
                score = {c: geomean([v[u] for u in common]) for c, v in lats.items()}
                pick = min(timed, key=lambda r: (score[r.commit], -r.number))
                basis = (f"lowest geometric-mean latency over the {len(common)} workload(s) every timed kept "
                         f"experiment measured ({len(timed)} timed of {len(on_trunk)} kept on '{trunk}')")
            else:
                pick = max(timed, key=lambda r: r.number)
                basis = ("the kept experiments were timed on different workloads, so they are not comparable "
                         f"directly: the latest timed one kept on '{trunk}'")
            ratios = [r.ratio for r in on_trunk if r.ratio]
            speed = 1.0 / math.prod(ratios) if ratios else None
            out.append(Best(t, basis, pick, merged[pick.commit], len(on_trunk), lats[pick.commit], speed))
        else:
            pick = max(on_trunk, key=lambda r: r.number)
            out.append(Best(t, f"untimed history: each keep was judged on correctness alone (no latency "
                               f"measured), so the best is the latest kept experiment on '{trunk}'", pick, merged[pick.commit], len(on_trunk)))
    return out
