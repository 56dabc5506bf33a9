"""The definition's reference checked in a process of its own (bench/isolated.py, shared by refcheck and
refproof): a reference that ends its process, sees autogk's API tokens, or hangs out of the timer's reach
is one clear error naming the definition file, and leaves no process behind."""
from __future__ import annotations

import json
import os
import time

import pytest

from conftest import DATA

from autogk_git.bench import isolated, refcheck
from autogk_git.errors import TargetError

DEFINITION = json.loads((DATA / "scale" / "definition.json").read_text())
WORKLOADS = [json.loads(line)["workload"] for line in (DATA / "scale" / "workloads.jsonl").read_text().splitlines()
             if line.strip()]


def check_with(reference: str, timeout_s: float = 30) -> str:
    return refcheck.check({**DEFINITION, "reference": reference}, WORKLOADS, "defs/scale.json", timeout_s)


def test_a_reference_that_returns_is_checked_in_its_own_process():
    assert "reference checked on workload" in check_with(DEFINITION["reference"])


def test_a_reference_that_ends_its_process_names_the_exit_code():
    with pytest.raises(TargetError) as e:
        check_with("import os\ndef run(x, bias, scale):\n    os._exit(7)\n")
    assert e.value.message.startswith("defs/scale.json: the reference ended the check's process (exit code 7)")


def test_the_references_process_never_sees_api_tokens(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-not-for-the-target")
    monkeypatch.setenv("MODAL_TOKEN_SECRET", "not-for-the-target-either")
    seen = ("import os\ndef run(x, bias, scale):\n"
            "    leaked = [k for k in os.environ if k.startswith(('ANTHROPIC_', 'MODAL_TOKEN'))]\n"
            "    if leaked:\n        raise RuntimeError('saw ' + ','.join(leaked))\n"
            "    return x * scale + bias\n")
    assert "reference checked on workload" in check_with(seen)


def test_an_endless_reference_is_stopped_by_its_own_limit_not_the_backstop(monkeypatch):
    """The per-call limit inside the check's process ends it: the backstop (10 minutes here) never comes."""
    monkeypatch.setattr(isolated, "STARTUP_S", 600)
    started = time.monotonic()
    with pytest.raises(TargetError) as e:
        check_with("def run(x, bias, scale):\n    while True:\n        pass\n", timeout_s=3)
    assert "the reference did not finish within 3 s on the smallest workload (n=" in e.value.message
    assert time.monotonic() - started < 300, "the check's own limit did not fire"


def test_a_reference_out_of_the_timers_reach_is_killed_with_what_it_started(monkeypatch, tmp_path):
    """It ignores the check's own alarm and starts a child: the backstop kills both at the limit.

    It waits in sleeps, not a busy loop: out of the alarm's reach either way, and the ~25 s it waits
    leave the CPU to the other tests (a busy loop burnt one core of the suite's two for all of it)."""
    monkeypatch.setattr(isolated, "STARTUP_S", 5)
    pid_file = tmp_path / "child.pid"
    stuck = ("import signal, subprocess, time\ndef run(x, bias, scale):\n"
             "    signal.signal(signal.SIGALRM, signal.SIG_IGN)\n"
             f"    child = subprocess.Popen(['sleep', '600'])\n    open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
             "    while True:\n        time.sleep(0.5)\n")
    with pytest.raises(TargetError) as e:
        check_with(stuck, timeout_s=20)
    assert "the reference did not finish within 20 s on the smallest workload (n=" in e.value.message
    assert "reference_timeout_s" in e.value.hint
    pid = int(pid_file.read_text())
    try:
        os.kill(pid, 0)
        with open(f"/proc/{pid}/stat") as f:
            alive = f.read().split()[2] != "Z"  # a zombie waits for init to reap it: it runs no more
    except ProcessLookupError:
        alive = False
    assert not alive, "the reference's child outlived the check"


def test_an_endless_fast_reference_is_not_used_and_the_proof_says_why(tmp_path):
    """refproof's calls run under the same per-call limit: a fast reference that never returns is an error
    for its workloads, said in the line, and the definition's reference judges."""
    from autogk_git.bench import refproof
    (tmp_path / "reference.py").write_text("def run(x, bias, scale):\n    while True:\n        pass\n")
    line = refproof.check(DEFINITION, WORKLOADS[:1], tmp_path, None, "kernels/scale/definition.json", 2,
                          1 << 24, cache=False)
    assert "reference.py raised on set seed 1234: TimeoutError: did not finish within 2 s" in line, line
    assert "it is NOT used" in line


def _unique(reference: str) -> str:
    """The reference with a comment no other test's has: its content is checked afresh here."""
    return f"# {os.urandom(8).hex()}\n{reference}"


def test_a_pass_is_remembered_by_content_and_the_next_check_starts_no_process(monkeypatch):
    """The first `iterate` after `init` (and a second project of the same target) checked the same reference
    again in a process of its own, ~1.3 CPU-s for what was known."""
    ref = _unique(DEFINITION["reference"])
    first = check_with(ref)
    started = []
    real = isolated.run
    monkeypatch.setattr(isolated, "run", lambda *a, **k: started.append(a[0]) or real(*a, **k))
    assert check_with(ref) == first and started == []
    check_with(_unique(DEFINITION["reference"]))  # other content: checked
    assert started == ["refcheck"]


def test_a_failure_is_never_remembered(monkeypatch):
    bad = _unique("def run(x, bias, scale):\n    return None\n")
    started = []
    real = isolated.run
    monkeypatch.setattr(isolated, "run", lambda *a, **k: started.append(a[0]) or real(*a, **k))
    for _ in range(2):
        with pytest.raises(TargetError, match="not a tensor"):
            check_with(bad)
    assert started == ["refcheck", "refcheck"]


def test_a_workload_with_data_files_is_checked_every_time(monkeypatch, tmp_path):
    """Its files can change under the same name: no pass is remembered for it."""
    wl = {**WORKLOADS[0], "inputs": {**WORKLOADS[0].get("inputs", {}), "x": {"type": "safetensors", "path": "x.safetensors",
                                                                           "tensor_key": "x"}}}
    assert refcheck._mark(DEFINITION, wl, None, "cpu") is None
    assert refcheck._mark(DEFINITION, WORKLOADS[0], None, "cpu") is not None


ASKED_ON_A_GPU_MACHINE = r"""
import json, sys
from autogk_git.bench import proofs, refcheck
proofs.NVIDIA_NODES = ("/dev/null",)  # a device node: a machine with a GPU, as far as the asking process can tell
definition, workloads = json.loads(sys.argv[1]), json.loads(sys.argv[2])
for _ in range(2):
    refcheck.check(definition, workloads, "defs/scale.json", 60)
print(json.dumps({"torch": "torch" in sys.modules,
                  "marks": len(list((proofs.cache_root() / "reference-checks").glob("*-cuda")))}))
"""


def test_the_key_costs_the_asking_process_no_torch_and_a_cpu_run_is_no_cuda_pass(tmp_path, monkeypatch):
    """On a machine with a GPU node, asking torch which device a check would see cost every `init`, `bench`
    and first `iterate` a torch import (~1.3 CPU-s) before the cache was even read. The kind is now told
    from the node and CUDA_VISIBLE_DEVICES; a check whose process saw no CUDA there (here: a CPU-only
    machine made to look like a GPU one) keeps no pass under "cuda"."""
    import subprocess
    import sys
    from conftest import REPO
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    definition = {**DEFINITION, "reference": _unique(DEFINITION["reference"])}
    out = subprocess.run([sys.executable, "-c", ASKED_ON_A_GPU_MACHINE, json.dumps(definition), json.dumps(WORKLOADS)],
                         capture_output=True, text=True, cwd=REPO, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {"torch": False, "marks": 0}


def test_cuda_visible_devices_that_hides_every_device_is_a_cpu_machine(monkeypatch):
    from autogk_git.bench import proofs
    monkeypatch.setattr(proofs, "NVIDIA_NODES", ("/dev/null",))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert proofs.likely_device_kind() == "cuda"
    for hidden in ("", "-1", "-1,0"):
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", hidden)
        assert proofs.likely_device_kind() == "cpu", hidden
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert proofs.likely_device_kind() == "cuda"
