"""A compact summary beside each result note, so listing 10,000 experiments reads kilobytes, not megabytes.

A result note holds every workload's samples (about 14 kB at 8 workloads and 20 rounds); `autogk log`
needs a dozen fields of it. Each result is therefore written with a second note, in
`refs/notes/autogk/summaries`, holding only those fields (`digest`), the commit it describes and the
blob id of the result note it was made from. A reader trusts a summary only while both still match
(the result note was not rewritten, merged from a remote or copied onto another commit by an amend);
otherwise it reads the full note, so an old history without summaries lists correctly, just slower.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from autogk_git.git import repo
from autogk_git.record import floor, notes, refs
from autogk_git.record.figures import coverage_text, geomean, judged_all, latencies, ratio_vs_parent

VERSION = 2


def digest(res: dict[str, Any]) -> dict[str, Any]:
    """The part of a result note that listing needs."""
    v = res.get("verdict") or {}
    lat = latencies(res)
    return {"decision": v.get("decision", "pending"), "hypothesis": res.get("hypothesis") or "",
            "figures": v.get("figures", ""), "reason": v.get("reason", ""), "agent": res.get("agent", ""),
            "backend": res.get("backend", ""), "created": res.get("created") or "", "parent": res.get("parent") or "",
            "timed": bool(res.get("timing")), "latency_us": geomean(list(lat.values())),
            "ratio": ratio_vs_parent(res), "lat": lat, "judged_all": judged_all(res),
            "coverage": coverage_text(res), "floor": (floor.of(res) or {}).get("min_share")}


def write_result(root: Path, result: dict[str, Any]) -> str:
    """Write a result note and its summary; returns the result note's blob id.

    The note is stored as an exact blob (hash-object, then notes add -C) so its id is known without
    reading it back and no message clean-up can change it."""
    commit = result["commit"]
    blob = repo.hash_blob(root, notes.format_result(result))
    repo.attach_note(root, refs.NOTES_RESULTS, commit, blob)
    summary = {"v": VERSION, "commit": commit, "note": blob, "digest": digest(result)}
    repo.write_note(root, refs.NOTES_SUMMARIES, commit, json.dumps(summary, separators=(",", ":")) + "\n")
    return blob


def read(root: Path, results_map: dict[str, str]) -> dict[str, dict[str, Any]]:
    """{commit: digest} for the commits whose summary matches their current result note.

    `results_map` is {commit: result note blob} (the results ref's `git notes list`)."""
    smap = repo.list_notes(root, refs.NOTES_SUMMARIES, check=False)  # absent ref: nothing
    wanted = {c: b for c, b in smap.items() if c in results_map}
    order = sorted(set(wanted.values()))
    blobs = repo.cat_blobs(root, order)
    order = [b for b in order if b in blobs]
    try:  # one parse for all: 10,000 small json.loads calls cost more than the text they read
        parsed = dict(zip(order, json.loads(b"[" + b",".join(blobs[b] for b in order) + b"]")))
    except ValueError:
        parsed = {}
        for b in order:
            try:
                parsed[b] = json.loads(blobs[b])
            except ValueError:
                continue
    out = {}
    for c, b in wanted.items():
        s = parsed.get(b)
        if (isinstance(s, dict) and s.get("v") == VERSION and s.get("commit") == c
                and s.get("note") == results_map[c] and isinstance(s.get("digest"), dict)):
            out[c] = s["digest"]
    return out
