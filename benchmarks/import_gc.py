"""What Python's cycle collector costs the heavy imports autogk's processes make, and what a CPU judge's
first shared tensor costs the machine.

    .venv/bin/python benchmarks/import_gc.py            # 5 fresh processes a case, medians
    .venv/bin/python benchmarks/import_gc.py --n 9 --json

Imports: each case runs in a fresh interpreter, once as Python comes and once with `gc.disable()` around
the imports (what `procs.no_gc` and the judge template's `_heavy_import` do), and prints the CPU seconds
(`time.process_time`) of: MLflow with its client and SQLite store modules (`tracking/store.py`'s
`open_client`), torch alone (a judge template), torch and Triton after MLflow (a loop process's later
imports, its heap already large).

After the imports: 300,000 objects made and kept, in a child forked from a process that imported torch and
Triton (a judge template's judges and kernel processes) and in a process that imported MLflow, with the
imports' collector as Python comes, held off, and held off then frozen (`gc.freeze`, what both now do).

Shared memory: a process that shares its first CPU tensor under torch's `file_system` strategy (the judge's,
`bench/judge/process.py`) starts a `torch_shm_manager`, which no process waits for; so its cost is read as
the whole machine's busy CPU (`/proc/stat`) over N such processes against N that share nothing. Run it on an
otherwise idle machine.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from readme_command_one import busy_cpu_s  # noqa: E402 - the one reader of the machine's busy seconds

CASES = {
    "mlflow, its client and store": ("", "import mlflow\nfrom mlflow.tracking import MlflowClient\n"
                                         "import mlflow.store.tracking.sqlalchemy_store\n"),
    "torch": ("", "import torch\n"),
    "torch and triton after mlflow": ("import mlflow\nimport mlflow.store.tracking.sqlalchemy_store\n",
                                      "import torch, triton\n"),
}

TIMED = """import gc, time
{before}
if {off}:
    gc.disable()
t = time.process_time()
{imports}
print(time.process_time() - t)
"""

# After the imports: 300,000 objects kept (a judge's or a loop's own work makes many) in a child forked from the
# importing process (a judge template's judges and kernel processes), or in the importing process itself.
AFTER = """import gc, os, sys, time, resource
how = {how!r}
if how != "as Python comes":
    gc.disable()
{imports}
if how != "as Python comes":
    gc.enable()
if how == "held off, then frozen":
    gc.freeze()
def work():
    kept = []
    for i in range(300000):
        kept.append({{"a": i, "b": [i]}})
if {fork}:
    pid = os.fork()
    if pid == 0:
        work()
        os._exit(0)
    os.waitpid(pid, 0)
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(r.ru_utime + r.ru_stime)
else:
    t = time.process_time()
    work()
    print(time.process_time() - t)
"""
HOWS = ("as Python comes", "held off", "held off, then frozen")

SHARE = """import torch, torch.multiprocessing as tmp
tmp.set_sharing_strategy("file_system")
if {share}:
    torch.zeros(1000).share_memory_()
"""


def timed(before: str, imports: str, off: bool) -> float:
    out = subprocess.run([sys.executable, "-c", TIMED.format(before=before, imports=imports, off=off)],
                         capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def machine_cpu(share: bool, n: int) -> float:
    t = busy_cpu_s()
    for _ in range(n):
        subprocess.run([sys.executable, "-c", SHARE.format(share=share)], check=True)
    time.sleep(1.5)  # the managers end when their last client has gone
    return (busy_cpu_s() - t) / n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=5, help="fresh processes a case (5)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    out: dict = {"imports_cpu_s": {}}
    for name, (before, imports) in CASES.items():
        on, off = [], []
        for _ in range(a.n):  # alternated: drift hits both alike
            on.append(timed(before, imports, False))
            off.append(timed(before, imports, True))
        out["imports_cpu_s"][name] = {"collector on": round(statistics.median(on), 3),
                                      "collector off": round(statistics.median(off), 3)}
    out["after_imports_cpu_s"] = {}
    for where, imports, fork in (("a forked child of a torch and Triton importer", "import torch, triton", True),
                                 ("the MLflow importer itself", "import mlflow\nimport mlflow.store.tracking."
                                  "sqlalchemy_store", False)):
        got = {how: [] for how in HOWS}
        for _ in range(a.n):
            for how in HOWS:
                p = subprocess.run([sys.executable, "-c", AFTER.format(how=how, imports=imports, fork=fork)],
                                   capture_output=True, text=True, check=True)
                got[how].append(float(p.stdout.strip().splitlines()[-1]))
        out["after_imports_cpu_s"][where] = {how: round(statistics.median(v), 3) for how, v in got.items()}
    plain, shared = machine_cpu(False, a.n), machine_cpu(True, a.n)
    out["first_shared_tensor_machine_cpu_s"] = round(shared - plain, 3)
    if a.json:
        print(json.dumps(out))
    else:
        for name, v in out["imports_cpu_s"].items():
            print(f"{name}: {v['collector on']:.3f} CPU-s, {v['collector off']:.3f} with the collector off")
        for where, v in out["after_imports_cpu_s"].items():
            print(f"300,000 objects made in {where}: " + ", ".join(f"{k} {x:.3f}" for k, x in v.items()) + " CPU-s")
        print(f"a process's first shared CPU tensor (torch_shm_manager started): "
              f"{out['first_shared_tensor_machine_cpu_s']:.3f} CPU-s of the machine")
    return 0


if __name__ == "__main__":
    sys.exit(main())
