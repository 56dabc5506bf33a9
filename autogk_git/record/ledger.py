"""Reading the experiment history back, in bulk: a handful of git processes however many experiments.

`rows` lists every experiment (refs + result summaries, record/summaries.py); `best` picks the best
kept kernel of a target; the figure helpers (record/figures.py) read latencies and ratios out of a
result note whether or not it was timed.
"""
from __future__ import annotations

import datetime as dt
import json
import math
import os
import re
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from autogk_git.record import notes, refs, summaries
from autogk_git.record.figures import (RATIO_KEYS, coverage_text, geomean, judged_all,  # noqa: F401 - the API
                                      latencies, ratio_vs_parent)
from autogk_git.git import commits, repo


@dataclass
class Row:
    target: str
    number: int
    state: str            # kept | archived | held (correct, untimed) | open
    commit: str
    decision: str         # keep | revert | untimed | pending
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
    judged_all: bool = False            # checked (and timed, where timed) on every workload of the target
    coverage: str = ""                  # "N of M workloads checked ..." from the verdict
    workload_latency: dict[str, float] = field(default_factory=dict, repr=False)
    floor_share: float | None = None    # the lowest share of its floor over the workloads (record/floor.py)
    judged_here: bool = True            # False: its result note was fetched, written by another clone

    def as_dict(self) -> dict[str, Any]:
        # Not dataclasses.asdict: its deep copies cost seconds at 10,000 rows.
        return {f: getattr(self, f) for f in ROW_FIELDS}


ROW_FIELDS = [f.name for f in fields(Row) if f.name != "workload_latency"]


# ------------------------------------------------------------------------------------------------
# Every experiment
# ------------------------------------------------------------------------------------------------

CACHE_VERSION = 5  # 5: digests carry the floor share


def _cache_path(root) -> Path:
    return repo.common_dir(Path(root)) / "autogk" / "history-cache.json"


def _load_cache(root) -> tuple[Path, dict[str, Any]]:
    path = _cache_path(root)
    try:
        cache = json.loads(path.read_text())
        if cache.get("version") != CACHE_VERSION:
            cache = {}
    except (OSError, ValueError):
        cache = {}
    cache.setdefault("notes", {})
    return path, cache


def _save_cache(path: Path, cache: dict[str, Any]) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({**cache, "version": CACHE_VERSION}, separators=(",", ":")))
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only repository: list without caching


def notes_index(root) -> dict[str, dict[str, Any]]:
    """{annotated commit: summary of its result note} (indexed_notes)."""
    return indexed_notes(root)[0]


def indexed_notes(root) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """({annotated commit: summary of its result note}, {annotated commit: note blob}).

    The summaries written beside each result (record/summaries.py) answer first: a few kilobytes per
    hundred experiments. A result without a valid summary (written before summaries existed, or
    rewritten since) is read in full once and its digest kept in a cache in the git directory, keyed
    by note blob and commit: blobs are content-addressed, so an entry never goes stale. The commit ->
    blob map is reused while the results ref has not moved.
    """
    path, cache = _load_cache(root)
    tips = dict(repo.for_each_ref(root, refs.NOTES_RESULTS, refs.NOTES_SUMMARIES))  # both in one process
    tip = tips.get(refs.NOTES_RESULTS)
    if tip is None:
        return {}, {}
    dirty = False
    if cache.get("notes_tip") == tip and isinstance(cache.get("map"), dict):
        nmap = cache["map"]
    else:
        nmap = repo.list_notes(root, refs.NOTES_RESULTS)
        cache.update(notes_tip=tip, map=nmap)
        dirty = True
    short = summaries.read(root, nmap) if tips.get(refs.NOTES_SUMMARIES) else {}
    known = cache["notes"]
    # Keyed by blob and commit: a note copied onto another commit (amend, rebase) holds a result
    # measured elsewhere, and notes.parse_result counts only the one measured on that commit.
    need = {f"{b}:{c}": (b, c) for c, b in nmap.items() if c not in short and f"{b}:{c}" not in known}
    if need:
        blobs = repo.cat_blobs(root, sorted({b for b, _ in need.values()}))
        for key, (b, c) in need.items():
            res = notes.parse_result(blobs[b].decode(errors="replace"), c) if b in blobs else None
            known[key] = summaries.digest(res) if res else None
        dirty = True
    if dirty:
        live = {f"{b}:{c}" for c, b in nmap.items() if c not in short}
        cache["notes"] = {k: v for k, v in known.items() if k in live}  # forget notes rewritten since
        _save_cache(path, cache)
    out = {c: known.get(f"{b}:{c}") for c, b in nmap.items() if c not in short}
    out.update(short)
    return {c: d for c, d in out.items() if d}, nmap


def rows(root, target: str | None = None, with_results: bool = False) -> list[Row] | tuple[list[Row], dict]:
    """Every experiment (of one target, or all), ordered by target and number.

    Git processes: for-each-ref and two rev-parse; notes list when the notes moved, cat-file for notes
    not cached yet, log for commits without a note: a handful whatever the number of experiments.
    with_results also returns {commit: full result note} (reads every note: for reports).
    """
    found: dict[tuple[str, int], dict[str, str]] = {}
    for name, sha in repo.for_each_ref(root, refs.BRANCH_PREFIX, refs.KEPT_PREFIX, refs.ARCHIVE_PREFIX,
                                       refs.UNTIMED_PREFIX):
        parsed = refs.ExperimentRef.parse(name)
        if not parsed or (target and parsed[1].target != target):
            continue
        kind, ref = parsed
        rec = found.setdefault((ref.target, ref.number), {"state": "open", "commit": sha})
        if kind != "branch":
            rec.update(state={"kept": "kept", "archive": "archived", "untimed": "held"}[kind], commit=sha)
    shas = [r["commit"] for r in found.values()]
    summ, nmap = indexed_notes(root)
    mine = repo.own_notes(root) if nmap else set()  # the notes this clone wrote (a file: no git process)
    own = {c for c, b in nmap.items() if b in mine}
    missing = [s for s in shas if s not in summ]
    info = repo.commit_info(root, missing)
    out = []
    for (t, n), rec in sorted(found.items()):
        c = rec["commit"]
        sm = summ.get(c)
        if sm is None:
            ci = info.get(c, {})
            sm = {"decision": "pending", "hypothesis": ci.get("subject", ""), "created": ci.get("date", "")}
        out.append(Row(t, n, rec["state"], c, sm.get("decision", "pending"), sm.get("hypothesis", ""),
                       sm.get("figures", ""), sm.get("reason", ""), sm.get("agent", ""), sm.get("backend", ""),
                       sm.get("created", ""), sm.get("parent", ""), bool(sm.get("timed")), sm.get("latency_us"),
                       sm.get("ratio"), bool(sm.get("judged_all")), sm.get("coverage", ""), sm.get("lat") or {},
                       sm.get("floor"), c not in summ or c in own))
    if with_results:
        texts = repo.read_notes(root, refs.NOTES_RESULTS, shas)
        results = {c: notes.parse_result(t, c) for c, t in texts.items()}
        return out, {c: r for c, r in results.items() if r}
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
    if not repo.rev(root, refs.branch(trunk)):
        return {}
    merged = {}
    for parts in commits.first_parent_merges(root, refs.branch(trunk)):
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


def nothing_kept(target: str, trunk: str, rs: list[Row]) -> str:
    """Why no kernel is best yet, with the command that changes it."""
    held = [r for r in rs if r.state == "held"]
    if held:
        h = max(held, key=lambda r: r.number)
        ref = refs.ExperimentRef(target, h.number).untimed_ref
        return (f"nothing kept on '{trunk}': {len(held)} experiment(s) held untimed (correct where checked, never "
                f"timed, so none is known to be faster); time one on a GPU: `autogk bench --rev {ref} --against "
                f"{h.parent[:10] or trunk} --backend local`, or merge correct ones on the CPU: "
                "`autogk iterate --merge-untimed`")
    return f"nothing kept on '{trunk}' yet: the trunk's kernel is the starting one; run `autogk iterate`"


_SIZE = re.compile(r"\((\d+) > (\d+)\)|(\d+) input elements exceed")


def why_unjudged(root: Path, row: Row) -> str:
    """Why a kept experiment was not judged on every workload (read from its note), and what resolves it."""
    text = repo.read_note(root, refs.NOTES_RESULTS, row.commit)
    res = notes.parse_result(text, row.commit) if text else None
    cov = ((res or {}).get("verdict") or {}).get("coverage") or {}
    if not cov:
        return ("its result is from before whole-workload judging; judge the trunk again: "
                f"`autogk iterate` (or `autogk show {row.number} --target {row.target}`)")
    sizes = [int(m[1] or m[3]) for u in cov.get("unchecked") or [] for m in [_SIZE.search(u.get("reason", ""))] if m]
    if sizes:
        return (f"{len(sizes)} workload(s) over [bench] cpu_max_numel were never checked on the CPU; run the loop "
                "where every workload runs: `autogk iterate --backend local` (a GPU), or raise the limit: "
                f"`AUTOGK_BENCH_CPU_MAX_NUMEL={max(sizes)} autogk iterate`")
    return f"see which workloads and why: `autogk show {row.number} --target {row.target}`"


def best(root: Path, trunk: str, target: str | None = None) -> list[Best]:
    """The best kept kernel of each target (see `Best.basis` for what "best" meant).

    Only kernels judged on every workload count: a keep decided on a subset (an older result, or
    workloads the backend could not run) says nothing about the others."""
    items = rows(root, target)
    merged = trunk_merges(root, trunk)
    by_target: dict[str, list[Row]] = {}
    for r in items:
        by_target.setdefault(r.target, []).append(r)
    out = []
    for t, rs in sorted(by_target.items()):
        on_trunk = [r for r in rs if r.state == "kept" and r.commit in merged]
        if not on_trunk:
            out.append(Best(t, nothing_kept(t, trunk, rs), None, None))
            continue
        judged = [r for r in on_trunk if r.judged_all]
        if not judged:
            out.append(Best(t, f"{len(on_trunk)} experiment(s) kept on '{trunk}', none judged on every workload: "
                               + why_unjudged(root, max(on_trunk, key=lambda r: r.number)), None, None,
                            len(on_trunk)))
            continue
        partial = len(on_trunk) - len(judged)
        note = f"; {partial} other kept experiment(s) not judged on every workload are left out" if partial else ""
        timed = [r for r in judged if r.timed and r.workload_latency]
        if timed:
            lats = {r.commit: r.workload_latency for r in timed}
            common = set.intersection(*(set(v) for v in lats.values()))
            if common:
                score = {c: geomean([v[u] for u in common]) for c, v in lats.items()}
                pick = min(timed, key=lambda r: (score[r.commit], -r.number))
                basis = (f"lowest geometric-mean latency over the {len(common)} workload(s) every timed kept "
                         f"experiment measured ({len(timed)} timed of {len(on_trunk)} kept on '{trunk}'){note}")
            else:
                pick = max(timed, key=lambda r: r.number)
                basis = ("the kept experiments were timed on different workloads, so they are not comparable "
                         f"directly: the latest timed one kept on '{trunk}'{note}")
            ratios = [r.ratio for r in on_trunk if r.ratio]
            # The product of the kept ratios is the speedup only when every keep on the trunk was timed on
            # every workload: one judged on a subset breaks the chain.
            speed = 1.0 / math.prod(ratios) if ratios and len(ratios) == len(on_trunk) and not partial else None
            out.append(Best(t, basis, pick, merged[pick.commit], len(on_trunk), lats[pick.commit], speed))
        else:
            pick = max(judged, key=lambda r: r.number)
            out.append(Best(t, f"untimed history: each keep was judged on correctness alone (no latency "
                               f"measured), so the best is the latest kept experiment on '{trunk}'{note}", pick,
                            merged[pick.commit], len(on_trunk)))
    return out
