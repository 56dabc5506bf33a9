"""`autogk doctor` for the slurm backend: the cluster answers, the partition is up with the GPUs asked
for, the shared folder is writable here, and a probe job on a compute node reads it and imports autogk."""
from __future__ import annotations

import secrets
import shlex
import sys
import time
from typing import Any

from autogk_git.bench.backends.slurm import cluster
from autogk_git.bench.backends.slurm.backend import PACKAGE_ROOT, shared_folder
from autogk_git.errors import BenchError

PROBE_WAIT_S = 90.0  # a probe still queued after this is reported as queued, not as a failure


def _gpus_asked(gres: str) -> int:
    """'gpu:h200:2' -> 2, 'gpu:1' -> 1, 'gpu' -> 1, '' -> 0."""
    if not gres.strip().startswith("gpu"):
        return 0
    last = gres.strip().split(":")[-1]
    return int(last) if last.isdigit() else 1


def _node_gpus(gres: str) -> int:
    """sinfo's GRES column, 'gpu:h200:8(S:0-1)' -> 8."""
    total = 0
    for part in gres.split(","):
        fields = part.split("(")[0].split(":")
        if fields and fields[0] == "gpu" and fields[-1].isdigit():
            total = max(total, int(fields[-1]))
    return total


def status(config, probe: bool = True) -> dict[str, Any]:
    """{'lines': what doctor prints, 'problems': each with its fix}."""
    s = config.slurm
    lines: list[str] = []
    problems: list[str] = []
    if not cluster.available():
        return {"lines": ["SLURM: sbatch/squeue not found"], "problems": [
            "[bench] backend is slurm but SLURM's commands are not on PATH: run autogk on the cluster's login "
            "node (or install slurm-client and set SLURM_CONF)"]}
    try:
        parts = cluster.partitions()
    except BenchError as e:
        return {"lines": ["SLURM: sinfo failed"], "problems": [f"{e.message}; fix: {e.hint}"]}
    name = s.partition or next((n for n, p in parts.items() if p["default"] == "True"), "")
    part = parts.get(name)
    if part is None:
        problems.append(f"[slurm] partition {name or '(default)'} is not one of sinfo's: {', '.join(parts) or 'none'}; "
                        "set [slurm] partition to one of them")
    else:
        lines.append(f"SLURM partition {name}: {part['avail']}, {part['nodes']} node(s) ({part['states']}), "
                     f"{part['cpus']} CPUs, GRES {part['gres'] or 'none'}")
        if part["avail"] != "up":
            problems.append(f"SLURM partition {name} is {part['avail']}: ask the cluster's admins, or pick another "
                            "[slurm] partition (sinfo lists them)")
        want, have = _gpus_asked(s.gres), _node_gpus(part["gres"])
        if s.inside == "local" and not want:
            problems.append("[slurm] inside = \"local\" times on GPUs, but [slurm] gres asks for none: "
                            "set gres = \"gpu:1\" (or inside = \"interpret\" for a CPU partition)")
        elif want > have:
            problems.append(f"[slurm] gres = {s.gres!r} asks for {want} GPU(s), but partition {name}'s nodes have "
                            f"{have}: lower gres, or pick a GPU partition")
    d = shared_folder(config)
    try:
        d.mkdir(parents=True, exist_ok=True)
        token = secrets.token_hex(8)
        (d / f"probe-{token}").write_text(token)
        lines.append(f"shared folder {d}: writable here")
    except OSError as e:
        problems.append(f"the shared folder {d} is not writable here ({e.strerror}): set [slurm] shared to a "
                        "folder the login and compute nodes both mount")
        return {"lines": lines, "problems": problems}
    if probe and part is not None and part["avail"] == "up":
        lines.append(_probe(config, d, token, problems))
    (d / f"probe-{token}").unlink(missing_ok=True)
    return {"lines": lines, "problems": problems}


def _probe(config, d, token: str, problems: list[str]) -> str:
    """A tiny job: read the token from the shared folder and import autogk with [slurm] python."""
    s = config.slurm
    python = s.python.strip() or sys.executable
    script = "\n".join(["#!/bin/bash", f"export PYTHONPATH={shlex.quote(str(PACKAGE_ROOT))}${{PYTHONPATH:+:$PYTHONPATH}}"
                        if not s.python.strip() else "", s.setup,
                        f"test \"$(cat {shlex.quote(str(d / ('probe-' + token)))})\" = {token} || {{ echo NOSHARE; exit 1; }}",
                        f"{shlex.quote(python)} -c 'import autogk_git.bench.backends.slurm.job_main' || {{ echo NOIMPORT; exit 1; }}",
                        f"echo ok > {shlex.quote(str(d / ('probe-' + token + '.ok')))}"]) + "\n"
    opts = ["--job-name=autogk-doctor", "--time=2", f"--output={d}/probe-{token}.out", "--ntasks=1", "--cpus-per-task=1"]
    for flag, value in (("partition", s.partition), ("account", s.account), ("qos", s.qos)):
        if value.strip():
            opts.append(f"--{flag}={value.strip()}")
    try:
        job_id = cluster.submit(script, opts + list(s.sbatch), env=None)
    except BenchError as e:
        problems.append(f"{e.message}; fix: {e.hint}")
        return "probe job: not submitted"
    deadline = time.monotonic() + PROBE_WAIT_S
    st = None
    while time.monotonic() < deadline:
        st = cluster.query(job_id)
        if st is None or not st.live:
            break
        time.sleep(1.0)
    ok = (d / f"probe-{token}.ok").exists()
    log = (d / f"probe-{token}.out").read_text(errors="replace") if (d / f"probe-{token}.out").exists() else ""
    for f in d.glob(f"probe-{token}*"):
        f.unlink(missing_ok=True)
    if ok:
        return f"probe job {job_id} on {st.node if st else '?'}: sees the shared folder and imports autogk"
    if st is not None and st.live:
        cluster.cancel(job_id)
        return f"probe job {job_id}: still {st.state.lower()} ({st.reason}) after {PROBE_WAIT_S:.0f} s; not confirmed"
    if "NOSHARE" in log:
        problems.append(f"a compute node cannot read the shared folder {d}: set [slurm] shared to a folder both mount")
    else:
        problems.append(f"the probe job {job_id} could not import autogk with {python} on the compute node "
                        f"({log.strip()[-300:] or (st.state if st else 'no log')}): set [slurm] python or setup")
    return f"probe job {job_id}: failed"
