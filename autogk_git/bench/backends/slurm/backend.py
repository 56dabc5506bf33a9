"""The slurm backend: one `sbatch` job per benchmark job, the same worker inside, files through a shared folder.

A job's folder is `<[slurm] shared>/<key>/`, where key is a hash of the job (sources, workloads,
seed, settings) and its limit: the same experiment's same stage always has the same key. The SLURM
job carries it in its comment (`autogk:<key>`) and the candidate's commit in its name
(`autogk-<stage>-<commit>`), so a run interrupted by a crash finds, on `autogk iterate`, the job it
left queued or running (or the result it left behind) and waits for that instead of submitting again.

What must be shared between this machine and the compute nodes: the shared folder (read and
written by both), and the Python given by [slurm] python (or this one) with autogk importable.
`autogk doctor` submits a probe job that checks both.

Faults are statuses, never a hang: a job past its time limit is TIMEOUT; one cancelled by someone
else, or lost with its node after [slurm] retries resubmissions, is HARNESS_ERROR (not the kernel's
fault, never a pass); each with the SLURM state and reason in its message and in `slurm` of the
result. Ctrl-C cancels the job (scancel) before the interrupt goes on. Queue time is recorded
(`queue_s`) but is not benchmark time: `gpu_s` counts from the job's start on its node.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from autogk_git.bench.backends import stop
from autogk_git.bench.backends.slurm import cluster
from autogk_git.bench.judge import hygiene
from autogk_git.bench.judge.status import Status
from autogk_git.errors import BenchError

PACKAGE_ROOT = Path(__file__).resolve().parents[4]  # the folder holding autogk_git/
RETRYABLE = ("NODE_FAIL", "PREEMPTED", "BOOT_FAIL")
"""Ends that say nothing about the kernel: the job is submitted again, up to [slurm] retries times."""
COMMENT_PREFIX = "autogk:"
SUBMITTED = "submitted.json"  # the job id of the folder's last submission (sbatch's answer)


def shared_folder(config) -> Path:
    raw = config.slurm.shared.strip()
    return Path(raw).expanduser() if raw else Path.home() / ".autogk" / "slurm"


def job_key(job: dict[str, Any], timeout_s: float, inside: str) -> str:
    blob = json.dumps([job, timeout_s, inside], sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:20]


def time_limit(config) -> str:
    """sbatch --time: [slurm] time, else the bench limit plus two minutes for start-up, in whole minutes."""
    if config.slurm.time.strip():
        return config.slurm.time.strip()
    return str(math.ceil(config.bench.timeout_s / 60) + 2)


class SlurmBackend:
    name = "slurm"

    def __init__(self, config) -> None:
        self.config = config
        self.s = config.slurm
        self.timing = self.s.inside == "local"

    def eligible(self, definition: dict[str, Any], workloads: list[dict[str, Any]]
                 ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        if self.s.inside == "interpret":  # the CPU interpreter's size limit holds inside the job too
            from autogk_git.bench.backends.interpret import InterpretBackend
            return InterpretBackend(self.config).eligible(definition, workloads)
        return list(workloads), []

    # -- submit ---------------------------------------------------------------------------------

    def _spec(self, job: dict[str, Any], timeout_s: float, d: Path) -> dict[str, Any]:
        """What the job reads: the job (blobs copied beside it), its limit, the backend inside, the config."""
        from autogk_git.bench.backends.modal.backend import blob_files  # the one reader of a job's blob list
        files = blob_files(job["definition"], job["workloads"], Path(job.get("blob_root") or "."))
        if files:
            for rel, src in files.items():
                dst = d / "blobs" / rel
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src, dst)
            job = dict(job, blob_root=str(d / "blobs"))
        cfg = self.config.as_dict()
        cfg["bench"]["gpu"] = ""  # inside the job: the GPUs SLURM gave it (CUDA_VISIBLE_DEVICES)
        return {"job": job, "timeout_s": timeout_s, "inside": self.s.inside, "config": cfg}

    def _script(self, d: Path) -> str:
        python = self.s.python.strip() or sys.executable
        lines = ["#!/bin/bash", "set -e", f"cd {_q(str(d))}"]
        if not self.s.python.strip():  # this interpreter: make sure it imports this autogk
            lines.append(f"export PYTHONPATH={_q(str(PACKAGE_ROOT))}${{PYTHONPATH:+:$PYTHONPATH}}")
        if self.s.setup.strip():
            lines.append(self.s.setup)
        lines.append(f"exec {_q(python)} -m autogk_git.bench.backends.slurm.job_main {_q(str(d))}")
        return "\n".join(lines) + "\n"

    def _options(self, job: dict[str, Any], key: str, d: Path) -> list[str]:
        s = self.s
        commit = f"{int(job.get('seed', 0)):08x}"  # the seed is the candidate commit's first 8 hex digits
        opts = [f"--job-name=autogk-{job.get('stage', 'job')}-{commit}", f"--comment={COMMENT_PREFIX}{key}",
                f"--output={d}/slurm-%j.out", "--open-mode=append", f"--time={time_limit(self.config)}",
                f"--cpus-per-task={s.cpus}", "--nodes=1", "--ntasks=1",
                "--no-requeue"]  # a node failure is resubmitted here, counted; SLURM's own requeue is not
        for flag, value in (("partition", s.partition), ("gres", s.gres), ("mem", s.mem),
                            ("account", s.account), ("qos", s.qos)):
            if value.strip():
                opts.append(f"--{flag}={value.strip()}")
        return opts + list(s.sbatch)

    def _submit(self, job: dict[str, Any], timeout_s: float, key: str, d: Path) -> str:
        if d.exists():
            shutil.rmtree(d)
        d.mkdir(parents=True)
        (d / "spec.json").write_text(json.dumps(self._spec(job, timeout_s, d)))
        env = hygiene.scrub_env(dict(os.environ), [])  # API keys stay on this machine
        job_id = cluster.submit(self._script(d), self._options(job, key, d), env)
        (d / SUBMITTED).write_text(json.dumps({"job_id": job_id}))
        return job_id

    # -- run --------------------------------------------------------------------------------------

    def run(self, job: dict[str, Any], timeout_s: float, on_progress=None) -> dict[str, Any]:
        key = job_key(job, timeout_s, self.s.inside)
        d = shared_folder(self.config) / key
        say = (lambda text, t=0.0: on_progress("queue", "", text, t)) if on_progress else (lambda text, t=0.0: None)
        info: dict[str, Any] = {"retries": 0, "resumed": False}
        left = _left_by_earlier_run(d)
        found = None if left else cluster.find(COMMENT_PREFIX + key)
        if left:
            info["resumed"] = True
            say("a result an earlier run left in the shared folder")
            return self._finish(left, d, info)
        if found is not None:
            job_id = found.job_id
            info["resumed"] = True
            say(f"SLURM job {job_id}, left by an earlier run, is still {found.state.lower()}; waiting for it")
            submitted = None
        else:
            job_id = self._submit(job, timeout_s, key, d)
            submitted = time.time()
        while True:
            info["job_id"] = job_id
            end = self._wait(job_id, d, submitted, info, say, on_progress)
            if isinstance(end, dict):
                return self._finish(end, d, info)
            if end.state in RETRYABLE and info["retries"] < self.s.retries:
                info["retries"] += 1
                say(f"SLURM job {job_id} ended {end.state} on {end.node or 'its node'}; submitting again "
                    f"(retry {info['retries']} of {self.s.retries})")
                for k in ("started", "queue_s"):
                    info.pop(k, None)
                job_id = self._submit(job, timeout_s, key, d)
                submitted = time.time()
                continue
            return self._fault(job, end, d, info)

    def _wait(self, job_id: str, d: Path, submitted: float | None, info: dict[str, Any], say, on_progress
              ) -> dict[str, Any] | cluster.JobState:
        """Poll until the job's result (returned) or its end without one (its last state)."""
        seen = ""
        offset = 0
        try:
            while True:
                if stop.requested():
                    raise KeyboardInterrupt
                started = _read(d / "started.json")
                if started and "started" not in info:
                    info["started"] = started["started"]
                    if submitted:
                        info["queue_s"] = round(max(0.0, started["started"] - submitted), 3)
                offset = _forward(d / "progress.jsonl", offset, on_progress)
                done = _ours(d, "result.json", job_id)
                if done is not None:
                    return done
                _raise_job_error(d, job_id)
                st = cluster.query(job_id)
                if st is None or not st.live:
                    time.sleep(0.5)  # a result written as the job ended may still be on its way (NFS)
                    done = _ours(d, "result.json", job_id)
                    if done is not None:
                        return done
                    _raise_job_error(d, job_id)
                    return st or cluster.JobState(job_id, "UNKNOWN", "SLURM no longer knows this job")
                info["restarts"] = st.restarts
                now = f"{st.state}|{st.reason}|{st.restarts}"
                if now != seen:
                    seen = now
                    waited = time.time() - submitted if submitted else 0.0
                    if st.state in cluster.PENDING:
                        say(f"SLURM job {job_id} queued ({st.reason or st.state.lower()})"
                            + (f", requeued {st.restarts} time(s)" if st.restarts else ""), waited)
                    else:
                        say(f"SLURM job {job_id} {st.state.lower()} on {st.node}", waited)
                offset = 0 if st.state in cluster.PENDING and st.restarts else offset
                time.sleep(self.s.poll_s)
        except BaseException as e:
            # Ctrl-C (or the parallel loop stopping, whatever this thread was doing then): this job is
            # ours; nothing is left running. Another error leaves it for the next run to find (resume).
            if isinstance(e, KeyboardInterrupt) or stop.requested():
                cluster.cancel(job_id)
                shutil.rmtree(d, ignore_errors=True)
            raise

    def _finish(self, out: dict[str, Any], d: Path, info: dict[str, Any]) -> dict[str, Any]:
        ran = dict(out.pop("slurm", {}) or {})
        info = {**info, **ran}  # where it ran, as the job saw it
        info["state"] = "COMPLETED"
        out["slurm"] = info
        out.setdefault("environment", {})["slurm"] = info
        out["gpu_s"] = out.pop("run_s", out.get("gpu_s", 0.0))
        if self.timing:
            out["gpu"] = f"slurm:{info.get('node', '')}:{info.get('gpus', '')}"
        shutil.rmtree(d, ignore_errors=True)  # consumed: the same job submitted later runs afresh
        return out

    def _fault(self, job: dict[str, Any], end: cluster.JobState, d: Path, info: dict[str, Any]) -> dict[str, Any]:
        """A job that ended without a result: every (kernel, workload) gets the status its end means."""
        started = _read(d / "started.json") or {}
        node = end.node or started.get("node", "")
        where = f"SLURM job {end.job_id}" + (f" on {node}" if node else "")
        if end.state in ("TIMEOUT", "DEADLINE"):
            status, why = Status.TIMEOUT, f"{where} hit its time limit (--time={time_limit(self.config)})"
        elif end.state == "OUT_OF_MEMORY":
            status, why = Status.RUNTIME_ERROR, f"{where} ran out of memory (raise [slurm] mem)"
        elif end.state == "CANCELLED":
            status, why = Status.HARNESS_ERROR, f"{where} was cancelled from outside this run (scancel)"
        elif end.state in RETRYABLE:
            status, why = Status.HARNESS_ERROR, (f"{where} ended {end.state}"
                                                 f" after {info['retries']} resubmission(s) ([slurm] retries)")
        elif end.state in ("COMPLETED", "FAILED"):
            raise BenchError(f"{where} ended {end.state} without a result; its log:\n{_tail(d)}",
                             "check [slurm] python and setup (the compute node must import autogk), "
                             "then `autogk doctor`")
        else:
            status, why = Status.HARNESS_ERROR, f"{where} ended {end.state} ({end.reason}) without a result"
        info.update(job_id=end.job_id, node=node, state=end.state, reason=end.reason)
        info.setdefault("gpus", started.get("gpus", ""))
        rec = {"status": status.value, "message": why}
        labels = {label: {wl["uuid"]: dict(rec) for wl in job["workloads"]} for label in job["sources"]}
        out = {"labels": labels, "environment": {"slurm": info}, "attempts": 1 + info["retries"],
               "records": [{"event": "slurm_fault", **info, "message": why}], "stderr_tail": _tail(d),
               "slurm": info, "gpu_s": 0.0}
        shutil.rmtree(d, ignore_errors=True)
        return out


def _q(s: str) -> str:
    import shlex
    return shlex.quote(s)


def _read(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _ours(d: Path, name: str, job_id: str | None = None) -> dict[str, Any] | None:
    """The record `name` in the job's folder, if the SLURM job it was written by is job_id (default: the
    last one submitted, `submitted.json`). Each submission of a job uses one folder: an earlier
    submission's job that SLURM reported ended (its node set down) may still run there and write its
    record late, which is not the result of the submission waited for (nor of a later, identical job)."""
    rec = _read(d / name)
    if rec is None:
        return None
    want = job_id or str((_read(d / SUBMITTED) or {}).get("job_id", ""))
    wrote = str((rec.get("slurm") or {}).get("job_id", "") if name == "result.json" else rec.get("job_id", ""))
    return rec if not want or not wrote or wrote == want else None


def _left_by_earlier_run(d: Path) -> dict[str, Any] | None:
    """A result whose run ended (crash, kill) before it read it: the same job, already measured by the job
    last submitted for it."""
    return _ours(d, "result.json")


def _raise_job_error(d: Path, job_id: str) -> None:
    err = _ours(d, "error.json", job_id)
    if err is None:
        return
    shutil.rmtree(d, ignore_errors=True)
    raise BenchError(f"SLURM job {job_id} on {err.get('node', '?')}: {err.get('error', '')}",
                     err.get("hint") or "run `autogk doctor` on the compute node's Python")


def _forward(path: Path, offset: int, on_progress) -> int:
    """Pass the job's new status lines on (whole lines only); returns the new offset."""
    if on_progress is None:
        return offset
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read()
    except OSError:
        return offset
    end = data.rfind(b"\n") + 1
    for line in data[:end].splitlines():
        try:
            rec = json.loads(line)
            on_progress(rec["label"], rec["uuid"], rec["status"], float(rec["elapsed_s"]))
        except (ValueError, KeyError, TypeError):
            continue
    return offset + end


def _tail(d: Path, n: int = 3000) -> str:
    logs = sorted(d.glob("slurm-*.out"))
    try:
        return logs[-1].read_text(errors="replace")[-n:] if logs else ""
    except OSError:
        return ""
