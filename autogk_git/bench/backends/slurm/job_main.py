"""What one SLURM job runs: `python -m autogk_git.bench.backends.slurm.job_main FOLDER`.

FOLDER (in the shared folder) holds spec.json: the job, its time limit, the backend to run inside
(`local`: the GPUs SLURM gave the job, timed; `interpret`: CPU) and the project's config. The same
backend class as on a desk runs the same worker; this side only adds where it ran:
    started.json   written first: job id, node, GPUs, start time (the submitter's queue time ends here)
    progress.jsonl one line per status as the worker reports it (the submitter's progress line)
    result.json    the worker's result plus a `slurm` record, written whole (rename) at the end
The submitter writes submitted.json (the job id sbatch gave) and reads a result or error only from that
job: a job of an earlier submission that SLURM reported ended may still run here and write late.
"""
from __future__ import annotations

import json
import os
import socket
import sys
import time
import traceback
from pathlib import Path
from typing import Any


def where() -> dict[str, Any]:
    """This job's SLURM id, node and GPUs, from the variables SLURM sets."""
    e = os.environ
    gpus = e.get("SLURM_JOB_GPUS") or e.get("SLURM_STEP_GPUS") or e.get("CUDA_VISIBLE_DEVICES") or ""
    return {"job_id": e.get("SLURM_JOB_ID", ""), "node": e.get("SLURMD_NODENAME") or socket.gethostname(),
            "partition": e.get("SLURM_JOB_PARTITION", ""), "gpus": gpus,
            "restart": int(e.get("SLURM_RESTART_COUNT", "0") or 0)}


def _write(path: Path, obj: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(obj))
    os.replace(tmp, path)  # whole or absent: the submitter never reads half a file


def main(folder: str) -> int:
    d = Path(folder)
    spec = json.loads((d / "spec.json").read_text())
    info = where()
    t0 = time.time()
    _write(d / "started.json", {**info, "started": t0})
    progress = open(d / "progress.jsonl", "w")  # a requeued job starts its lines again

    def on_progress(label: str, uuid: str, status: str, elapsed_s: float) -> None:
        progress.write(json.dumps({"label": label, "uuid": uuid, "status": status, "elapsed_s": elapsed_s}) + "\n")
        progress.flush()

    try:
        from autogk_git import config as config_mod
        from autogk_git.bench.backends import get_backend
        cfg = config_mod.parse(spec["config"], where=str(d / "spec.json"), environ={})
        backend = get_backend(spec["inside"], cfg)
        out = backend.run(spec["job"], float(spec["timeout_s"]), on_progress=on_progress)
        out["run_s"] = round(time.time() - t0, 3)
        out["slurm"] = info
        _write(d / "result.json", out)
        return 0
    except BaseException as e:  # noqa: BLE001 - the submitter reads this instead of a result
        _write(d / "error.json", {**info, "error": f"{type(e).__name__}: {e}",
                                  "hint": getattr(e, "hint", ""), "traceback": traceback.format_exc()[-3000:]})
        return 1
    finally:
        progress.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
