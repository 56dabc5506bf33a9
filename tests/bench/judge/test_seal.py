"""The seal against interpreter-level hooks (bench/judge/seal.py): a profile or trace function, a
monitoring tool, a gc callback, a signal handler, another audit hook, or a module swapped in
sys.modules, each set by a kernel in its own process, is TAMPERED. Planted kernels in a real judge on
CPU."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from autogk_git.bench import runner

DATA = Path(__file__).resolve().parents[2] / "data"
DEF = json.loads((DATA / "scale" / "definition.json").read_text())
WLS = [json.loads(l)["workload"] for l in (DATA / "scale" / "workloads.jsonl").read_text().splitlines()]
ENV = {"CUDA_VISIBLE_DEVICES": ""}


def cheat(name: str) -> dict:
    return {"kernel.py": (DATA / "cheats" / f"{name}.py").read_text()}


def against_sleeps_honest(candidate: dict) -> tuple[dict, dict]:
    """An ab job on one small workload, the planted kernel against the honest one that does its work;
    (the parent's record, the candidate's)."""
    s = {"device": "cpu", "timed": True, "trials": 2, "reps": 6, "warmup": 2, "min_rounds": 3, "max_rounds": 3,
         "min_effect": 0.01, "confidence": 0.95}
    j = {"version": 1, "stage": "ab", "definition": DEF, "workloads": WLS[4:5], "generator": None, "blob_root": ".",
         "settings": s, "seed": 11, "sources": {"parent": cheat("sleeps_honest"), "candidate": candidate}}
    out = runner.run_worker(j, dict(os.environ, **ENV), 300)
    u = WLS[4]["uuid"]
    return out["labels"]["parent"][u], out["labels"]["candidate"][u]


def test_a_profile_hook_set_at_import_that_rewrites_the_figures_is_tampering_on_import():
    # rewrites_its_reply.py divides its figures by 10 through sys.setprofile (on the old code only the
    # judge's clock caught it, after every round was timed): the seal sees the hook after the import.
    p, c = against_sleeps_honest(cheat("rewrites_its_reply"))
    assert c["status"] == "TAMPERED" and "on import" in c["message"], c
    assert "sys.setprofile" in c["message"], c
    assert c.get("ratio_vs_parent") is None and p["status"] == "PASSED", p


def test_a_hook_installed_and_removed_inside_the_window_is_heard():
    # The hook lives only inside the timed window: installed in a timed call, it scales the timer's
    # result by 0.75 as time_calls returns and removes itself, before the seal's check after the window.
    # 25 % is inside the host clock's slack (on the old code: PASSED at ~0.75, a false speedup). The
    # seal's audit hook heard sys.setprofile.
    p, c = against_sleeps_honest(cheat("hides_a_hook_in_the_window"))
    assert c["status"] == "TAMPERED" and "while timed" in c["message"], c
    assert "sys.setprofile" in c["message"], c
    assert c.get("ratio_vs_parent") is None and p["status"] == "PASSED", p


HOOKED = {  # label -> (what the kernel does at import, what the message names)
    "settrace": ("sys.settrace(lambda *a: None)", "sys.settrace"),
    "thread_profile": ("import threading; threading.setprofile(lambda *a: None)", "threading.setprofile"),
    "thread_trace": ("import threading; threading.settrace(lambda *a: None)", "threading.settrace"),
    "gc_callback": ("import gc; gc.callbacks.append(lambda phase, info: None)", "gc.callbacks"),
    "alarm": ("import signal; signal.signal(signal.SIGALRM, lambda s, f: None)", "signal handlers"),
    "audit": ("sys.addaudithook(lambda event, args: None)", "sys.addaudithook"),
    # the same hooks, hidden from the functions the seal read them through (no audit event is raised
    # for either): signal.getsignal made to answer the old handler, gc.callbacks rebound to an empty
    # list while the interpreter keeps calling the one it holds. PASSED on the old code.
    "alarm_hidden": ("import signal; _get = signal.getsignal; signal.signal(signal.SIGALRM, lambda s, f: None); "
                     "signal.getsignal = lambda n: signal.SIG_DFL if n == signal.SIGALRM else _get(n)",
                     "signal handlers"),
    "alarm_hidden_below": ("import signal, types; _s = signal._signal; "
                           "signal.signal(signal.SIGALRM, lambda s, f: None); "
                           "signal._signal = types.SimpleNamespace(**{k: getattr(_s, k) for k in dir(_s) "
                           "if not k.startswith('__')}); signal._signal.getsignal = "
                           "lambda n: 0 if n == signal.SIGALRM else _s.getsignal(n)", "signal handlers"),
    "gc_hidden": ("import gc; gc.callbacks.append(lambda phase, info: None); gc.callbacks = []", "gc.callbacks"),
    # the seal's own check replaced in its class: from then on no patch would be seen
    "check_replaced": ("seal = next(m for n, m in sys.modules.items() if n.endswith('.seal') and hasattr(m, 'Seal'))\n"
                       "seal.Seal.check = lambda self: ''", "seal.Seal.check"),
    # a thread (it can patch and put back between the seal's checks) that threading's count does not see:
    # started through _thread (threading never registers it), or beside a patched threading.active_count
    "raw_thread": ("import _thread, time; up = []\n"
                   "_thread.start_new_thread(lambda: up.append(1) or time.sleep(3600), ())\n"
                   "while not up:\n    time.sleep(0.01)", "thread(s)"),
    "thread_hidden": ("import threading, time; n = threading.active_count(); "
                      "threading.Thread(target=time.sleep, args=(3600,), daemon=True).start(); "
                      "threading.active_count = lambda: n", "thread(s)"),
    "unraisable": ("sys.unraisablehook = lambda u: None", "sys.unraisablehook"),
    "module_swap": ("import types, time as _t; m = types.ModuleType('time'); m.__dict__.update(vars(_t)); "
                    "sys.modules['time'] = m", "sys.modules['time']"),
}
MONITOR = ("sys.monitoring.use_tool_id(3, 'k'); "
           "sys.monitoring.set_events(3, sys.monitoring.events.PY_RETURN)")
# ... and hidden from the seal's reading: sys.monitoring's readers replaced to answer "no tool" for it
MONITOR_HIDDEN = MONITOR + ("; _t, _e = sys.monitoring.get_tool, sys.monitoring.get_events; "
                            "sys.monitoring.get_tool = lambda i: None if i == 3 else _t(i); "
                            "sys.monitoring.get_events = lambda i: 0 if i == 3 else _e(i)")
if hasattr(sys, "monitoring"):  # 3.12+: the H200 machine's python
    HOOKED["monitoring"] = (MONITOR, "sys.monitoring")
    HOOKED["monitoring_hidden"] = (MONITOR_HIDDEN, "sys.monitoring")


def _python_with_monitoring() -> str | None:
    """An interpreter of 3.12 or later: this one, else one on PATH or under pyenv's usual root."""
    if hasattr(sys, "monitoring"):
        return sys.executable
    import glob
    import shutil
    import subprocess
    found = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.1[2-9]*/bin/python")))
    found += [shutil.which(f"python3.{m}") for m in range(12, 16)]
    for f in found:  # the first that runs (a pyenv shim may name a version it will not start)
        if f and subprocess.run([f, "-c", "import sys; sys.monitoring"], capture_output=True).returncode == 0:
            return f
    return None


PY312 = _python_with_monitoring()  # read at import, before the tests' own HOME


@pytest.mark.skipif(PY312 is None, reason="no Python 3.12+ here (sys.monitoring is 3.12's)")
def test_a_monitoring_tool_hidden_from_its_readers_is_still_seen(tmp_path):
    """The seal's reading of sys.monitoring on its own (seal.py needs only the standard library at import),
    in a 3.12+ interpreter where this suite's is older: a tool whose readers the kernel replaced to answer
    "no tool" was the same hooks as before on the old code (the readers were looked up at each check)."""
    import subprocess
    seal_py = Path(runner.__file__).resolve().parent / "judge" / "seal.py"
    script = ("import importlib.util, sys\n"
              f"spec = importlib.util.spec_from_file_location('seal_alone', {str(seal_py)!r})\n"
              "seal = importlib.util.module_from_spec(spec); spec.loader.exec_module(seal)\n"
              "before = seal.interpreter_hooks()\n"
              f"{MONITOR_HIDDEN.replace('; ', chr(10))}\n"
              "assert sys.monitoring.get_tool(3) is None and sys.monitoring.get_events(3) == 0\n"
              "print('SEEN' if seal.interpreter_hooks() != before else 'HIDDEN')\n")
    out = subprocess.run([PY312, "-c", script], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["SEEN"], out.stdout


def hooked_source(install: str) -> dict:
    return {"kernel.py": f"import sys\nimport torch\n{install}\n\n"
                         "def run(x, bias, scale, out):\n    torch.add(x * scale, bias, out=out)\n"}


def test_interpreter_hooks_set_by_a_kernel_are_tampering():
    # Each runs code of the kernel's at points of the interpreter's choosing (a return, a collection, a
    # signal), outside the kernel's calls: after its last timed call, while the judge's steps run. On
    # the old code every one of these PASSED. An honest kernel, and one that imports torch._dynamo, pass.
    sources = {"torch_honest": cheat("torch_honest"), "imports_dynamo": cheat("imports_dynamo"),
               **{label: hooked_source(install) for label, (install, _) in HOOKED.items()}}
    j = {"version": 1, "stage": "quick", "definition": DEF, "workloads": WLS[:1], "generator": None,
         "blob_root": ".", "seed": 3, "settings": {"trials": 1, "device": "cpu", "stress": False}, "sources": sources}
    out = runner.run_worker(j, dict(os.environ, **ENV), 300)
    got = {label: next(iter(w.values())) for label, w in out["labels"].items()}
    assert got["torch_honest"]["status"] == "PASSED", got["torch_honest"]
    assert got["imports_dynamo"]["status"] == "PASSED", got["imports_dynamo"]
    for label, (_, named) in HOOKED.items():
        r = got[label]
        assert r["status"] == "TAMPERED" and "on import" in r["message"], (label, r)
        assert named in r["message"], (label, r)


# A trace function set inside a call, run, removed, and the seal's record of hearing it emptied (a list the
# kernel reaches by name): the outputs are right only where the hook ran. On the old code the hook ran and
# the kernel PASSED; now the seal refuses the hook outright, so it never runs.
TRACE_CLEARED = '''import sys
import torch

def _helper():
    return 1

def run(x, bias, scale, out):
    ran = []
    def tracer(frame, event, arg):
        ran.append(event)
    try:
        sys.settrace(tracer)
        _helper()
    except RuntimeError:
        pass
    finally:
        sys.settrace(None)
    seal = next(m for n, m in list(sys.modules.items()) if n.endswith(".seal") and hasattr(m, "_HEARD"))
    seal._HEARD.clear()
    torch.add(x * scale, bias, out=out)
    if not ran:  # what the hook was for: the kernel's own code, run by the interpreter at its choosing
        out.zero_()
'''
CAUGHT_NOT = TRACE_CLEARED.replace("    except RuntimeError:\n        pass\n", "")


def test_a_hook_set_and_removed_inside_a_call_never_runs_even_with_the_seals_record_emptied():
    j = {"version": 1, "stage": "quick", "definition": DEF, "workloads": WLS[:1], "generator": None,
         "blob_root": ".", "seed": 3, "settings": {"trials": 1, "device": "cpu", "stress": False},
         "sources": {"cleared": {"kernel.py": TRACE_CLEARED}, "raised": {"kernel.py": CAUGHT_NOT}}}
    out = runner.run_worker(j, dict(os.environ, **ENV), 300)
    got = {label: next(iter(w.values())) for label, w in out["labels"].items()}
    assert got["cleared"]["status"] in ("TAMPERED", "INCORRECT_NUMERICAL"), got["cleared"]  # never PASSED
    # not caught: the refusal is reported as the tampering it is, not as the kernel's runtime error
    assert got["raised"]["status"] == "TAMPERED" and "sys.settrace" in got["raised"]["message"], got["raised"]
