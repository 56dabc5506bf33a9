"""A Nsight Compute profile after a verdict (`[bench] profile = "ncu"`): of the kernel the trunk holds now.

Taken when the trunk's kernel has none yet (the first experiment of a run, or one timed against a trunk
a person moved) and after every keep (the candidate is the trunk's kernel from then on); never of a
reverted candidate, which no agent builds on. It runs after the benchmark, in its own process, so no
timed window sees it (bench/ncu.py), and only where the kernel ran on this machine (`--backend local`
with `ncu` on PATH): elsewhere nothing is stored and the agents' view says why in one line. With other
experiments in flight (--parallel) it waits for a later verdict, since they are being timed on the GPUs.

The profile goes into the experiment's result note (`profile`), so MLflow (`profile.*` metrics), a
clone (`autogk sync`) and every agent's view read the same figures.
"""
from __future__ import annotations

import hashlib
import json
import os
import time
from typing import Any

from autogk_git.bench import ncu
from autogk_git.bench.job import make_job
from autogk_git.project import Project
from autogk_git.record import floor, kernels
from autogk_git.record.experiments import results

WORKLOADS = 2  # the workloads furthest from their floor: where an agent's next change matters most


def chosen(result: dict[str, Any], workloads: list[dict[str, Any]], label: str) -> list[tuple[dict, str]]:
    """(workload, why) for the profile: the lowest shares of the floor, else the largest latencies, else the last
    (largest) workloads listed."""
    by = {w["uuid"]: w for w in workloads}
    fl = floor.of(result) or {}
    key = "share" if label == "candidate" else "parent_share"
    shares = {u: r[key] for u, r in (fl.get("workloads") or {}).items() if key in r and u in by}
    if shares:
        return [(by[u], f"{s:.1%} of its floor") for u, s in sorted(shares.items(), key=lambda kv: kv[1])[:WORKLOADS]]
    lat: dict[str, float] = {}
    for st in (result.get("stages") or {}).values():
        for u, w in ((st.get("workloads") or {}).get(label) or {}).items():
            if u in by and isinstance(w.get("latency_us"), (int, float)):
                lat[u] = float(w["latency_us"])
    if lat:
        return [(by[u], f"{v:.2f} us") for u, v in sorted(lat.items(), key=lambda kv: -kv[1])[:WORKLOADS]]
    return [(w, "largest listed") for w in workloads[-WORKLOADS:][::-1]]


def after_verdict(project: Project, target_name: str, result: dict[str, Any], say, busy: bool = False) -> bool:
    """Profile the trunk's kernel if this verdict calls for it; True when `result` got a `profile`."""
    backend = result.get("backend") or ""
    if ncu.unavailable(project.config, backend) or backend != "local" or busy:
        return False
    keep = (result.get("verdict") or {}).get("decision") == "keep"
    commit = result.get("commit") if keep else (result.get("against") or result.get("parent"))
    if not commit:
        return False
    target = project.target(target_name)
    sources = kernels.sources_at(project.root, target, commit)
    digest = hashlib.sha256(json.dumps(sources, sort_keys=True).encode()).hexdigest()
    if not keep and any((r.get("profile") or {}).get("commit") == commit
                        or (r.get("profile") or {}).get("sources_sha256") == digest
                        for r in results(project, target_name)):
        # This trunk kernel has its profile already: a keep's profile names the experiment's commit, the
        # trunk then holds the merge of it (another commit, the same kernel), so the kernel's text decides.
        return False
    picks = chosen(result, target.workloads, "candidate" if keep else "parent")
    job = make_job(target, "profile", {"profiled": sources},
                   [w for w, _ in picks], {}, int(commit[:8], 16))
    env = dict(os.environ)
    gpus = [g.strip() for g in (project.config.bench.gpu or "").split(",") if g.strip()]
    if gpus:
        env["CUDA_VISIBLE_DEVICES"] = gpus[0]
    say(f"#{result.get('experiment', 0):04d}: profiling {'the new trunk kernel' if keep else 'the trunk kernel'} "
        f"with ncu on {len(picks)} workload(s), outside the timed runs")
    tool = ncu.ncu_path() or "ncu"
    t0 = time.time()
    rows = ncu.profile(job, tool, env=env)
    picked = {w["uuid"]: (w, reason) for w, reason in picks}
    for r in rows:
        w, reason = picked.get(r["uuid"], ({}, ""))
        r.update(why=reason, axes=dict(w.get("axes") or {}))
    number = result.get("experiment", 0)
    result["profile"] = {
        "tool": "ncu", "ncu_version": ncu.version(tool), "commit": commit, "sources_sha256": digest,
        "kernel": (f"#{number:04d}'s candidate, now the trunk's kernel" if keep
                   else f"the trunk's kernel ({commit[:10]})"),
        "sections": list(ncu.SECTIONS), "workloads": rows, "profile_s": round(time.time() - t0, 1)}
    return True
