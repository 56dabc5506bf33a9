"""The judge a kernel cannot reach: planted kernels that game the harness, run by the real runner,
judge and candidate processes on CPU (Triton interpreter)."""
from __future__ import annotations

import json
import os
import shutil
import signal
import tempfile
import time
from pathlib import Path

import pytest

from autogk_git.bench import runner
from autogk_git.bench.judge import folders, hygiene
from autogk_git.bench.judge.status import FAILURES, Status

DATA = Path(__file__).resolve().parent / "data"
DEF = json.loads((DATA / "scale" / "definition.json").read_text())
WLS = [json.loads(line)["workload"] for line in (DATA / "scale" / "workloads.jsonl").read_text().splitlines()]


def cheat(name: str) -> dict[str, str]:
    return {"kernel.py": (DATA / "cheats" / f"{name}.py").read_text()}


def job(sources: dict, workloads=None, definition=None, **settings) -> dict:
    return {"version": 1, "stage": "quick", "definition": definition or DEF, "workloads": workloads or WLS[:2],
            "sources": sources, "generator": None, "blob_root": str(DATA / "scale"),
            "settings": {"trials": 2, "device": "cpu", **settings}, "seed": 5}


@pytest.fixture
def tmp_env(tmp_path, monkeypatch):
    """The runner's and the judge's temp folders inside tmp_path, so the test can see what is left."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return dict(os.environ, TRITON_INTERPRET="1", CUDA_VISIBLE_DEVICES="", TMPDIR=str(tmp_path))


def NO_SANDBOX(env: dict) -> dict:
    """The kernels run without their sandbox (bench/judge/sandbox.py): the defences behind it, alone,
    and kernels that must write where the test reads (their daemons' pid files)."""
    return dict(env, AUTOGK_SANDBOX="0")


def test_cheats_in_one_job_each_get_a_status_that_says_why_and_nothing_is_left_behind(tmp_path, tmp_env):
    names = ["honest", "returns_result", "forges_progress", "sabotages_inputs", "exits_at_import",
             "segfaults_at_import"]
    seen = []
    # Without the kernels' sandbox: the defences behind it (the progress record's HMAC) on their own.
    out = runner.run_worker(job({n: cheat(n) for n in names}), NO_SANDBOX(tmp_env), 300,
                            on_progress=lambda *a: seen.append(a))
    got = {label: list(w.values()) for label, w in out["labels"].items()}
    assert [r["status"] for r in got["honest"]] == [Status.PASSED] * 2

    # Returned its result instead of writing `out`: a status of its own, saying how to write outputs.
    r = got["returns_result"][0]
    assert r["status"] == Status.NOT_DESTINATION_PASSING and "output" in r["message"] and "return None" in r["message"]

    # Forged PASSED lines reached the progress file, and were thrown away: their HMAC does not verify.
    assert {r["status"] for r in got["forges_progress"]} == {Status.INCORRECT_NUMERICAL}
    forged = [r for r in out["records"] if r.get("event") == "forged_progress"]
    assert forged and forged[0]["lines"] > 0

    # Patching torch's random functions at import changes only the kernel's own process.
    assert {r["status"] for r in got["sabotages_inputs"]} == {Status.INCORRECT_NUMERICAL}

    # A process that dies while importing is a status for every workload, not a lost result.
    for name, why in (("exits_at_import", "exit code 0"), ("segfaults_at_import", "SIGSEGV")):
        rs = got[name]
        assert {r["status"] for r in rs} == {Status.COMPILE_ERROR}, name
        assert "died while importing" in rs[0]["message"] and why in rs[0]["message"], rs[0]["message"]

    # Where the job's time went: on the runner's side, and in each kernel process's start, step by step
    # (for the loop's speed; the processes that died while importing never reached "ready").
    assert set(out["spent_s"]) == {"launch", "judge", "end"} and all(v >= 0 for v in out["spent_s"].values())
    started = {s["label"]: s for s in out["kernel_starts"]}
    assert {"honest", "returns_result", "forges_progress", "sabotages_inputs"} <= set(started), started
    assert {"torch", "sandbox", "kernel_import"} <= set(started["honest"]["steps"]), started["honest"]
    assert started["honest"]["wait_s"] >= started["honest"]["steps"]["kernel_import"] >= 0

    # One progress call per (label, workload), with its status.
    assert sorted((lab, u) for lab, u, _, _ in seen) == sorted((lab, w["uuid"]) for lab in names for w in WLS[:2])
    assert all(isinstance(el, float) and el >= 0 for *_, el in seen)
    # No job, worker or kernel folder is left in the temp folder, nor a folder of torch's shared-memory
    # manager (the judge's: one a job was left in the caller's TMPDIR, ~9,000 in this machine's /tmp).
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(("autogk-", "torch-shm-dir-"))]


def test_a_harness_error_is_its_own_status_and_never_a_pass(tmp_env):
    broken = dict(DEF, reference="def run(x, bias, scale):\n    raise ValueError('reference is broken')\n")
    out = runner.run_worker(job({"candidate": cheat("honest")}, definition=broken), tmp_env, 300)
    rs = list(out["labels"]["candidate"].values())
    assert {r["status"] for r in rs} == {Status.HARNESS_ERROR}
    assert "reference is broken" in rs[0]["message"]
    assert Status.HARNESS_ERROR in FAILURES and Status.REFERENCE_ERROR in FAILURES
    assert Status(rs[0]["status"]).harness and not Status(rs[0]["status"]).ok


def test_secrets_are_scrubbed_from_the_kernel_and_redacted_from_the_result(tmp_path, tmp_env, monkeypatch):
    secret = "sk-test-" + "a1b2c3d4e5f6" * 3
    monkeypatch.setenv("ANTHROPIC_API_KEY", secret)
    (tmp_path / "credentials").write_text(secret)
    env = NO_SANDBOX(dict(tmp_env, ANTHROPIC_API_KEY=secret, MY_SERVICE_TOKEN="tok-" + "9" * 20,
                          AUTOGK_TEST_LEAK_FILE=str(tmp_path / "credentials")))
    out = runner.run_worker(job({"candidate": cheat("leaks_secret")}, workloads=WLS[:1]), env, 300)
    r = next(iter(out["labels"]["candidate"].values()))
    assert r["status"] == Status.RUNTIME_ERROR
    assert "own=<not in my environment>" in r["message"]  # scrubbed from its own environment
    # It read the secret from a file all the same: the message is redacted on its way into the result.
    assert "file=***" in r["message"]
    assert secret not in json.dumps(out) and "9" * 20 not in json.dumps(out)


def test_a_detached_daemon_dies_with_its_job_and_the_job_ends_at_its_limit(tmp_path, tmp_env):
    pidfile = tmp_path / "daemon.pids"
    env = NO_SANDBOX(dict(tmp_env, AUTOGK_TEST_PIDFILE=str(pidfile)))  # its daemon writes the pid file
    # 20 s: room for the judge to reach the kernel's import on a loaded 2-core machine (at 12 s, with two
    # suites running at once, the limit was once spent before it: "not run", no daemon to look for).
    limit = 20
    t0 = time.monotonic()
    out = runner.run_worker(job({"candidate": cheat("detached_child")}, workloads=WLS[:1]), env, limit)
    took = time.monotonic() - t0
    r = next(iter(out["labels"]["candidate"].values()))
    assert r["status"] == Status.TIMEOUT and f"{limit} s limit" in r["message"], r  # names the limit that ended it
    assert took < limit + 15, took
    pids = [int(p) for p in pidfile.read_text().split()]
    assert pids
    time.sleep(0.5)
    assert not [p for p in pids if _alive(p)]
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith("autogk-")]


def test_a_hang_costs_only_its_own_workload_when_time_remains(tmp_env):
    src = (DATA / "scale" / "kernel.py").read_text().replace(
        "    n = x.numel()", "    import time\n    if x.numel() == 1000:\n        time.sleep(3600)\n    n = x.numel()")
    seen = []
    out = runner.run_worker(job({"candidate": {"kernel.py": src}}, workloads=WLS[:3], workload_timeout_s=6),
                            tmp_env, 120, on_progress=lambda *a: seen.append(a))
    rs = [out["labels"]["candidate"][w["uuid"]] for w in WLS[:3]]
    assert [r["status"] for r in rs] == [Status.PASSED, Status.TIMEOUT, Status.PASSED]
    assert "6 s, one workload's share" in rs[1]["message"]
    assert [s[2] for s in seen] == ["PASSED", "TIMEOUT", "PASSED"]


def test_progress_lines_without_the_key_are_ignored(tmp_path):
    import hashlib
    import hmac
    good = {"event": "done", "label": "c", "uuid": "u", "status": "INCORRECT_NUMERICAL"}
    mac = hmac.new(b"k", f"1:{json.dumps(good)}".encode(), hashlib.sha256).hexdigest()
    p = tmp_path / "progress.jsonl"
    p.write_text("\n".join([
        json.dumps({"event": "done", "label": "c", "uuid": "u", "status": "PASSED"}),  # old plain format
        json.dumps({"seq": 1, "rec": dict(good, status="PASSED"), "mac": mac}),  # changed under a real MAC
        json.dumps({"seq": 1, "rec": good, "mac": mac}),
        json.dumps({"seq": 1, "rec": good, "mac": mac}),  # replayed
    ]) + "\n")
    reader = runner.ProgressReader(p, b"k")
    assert reader.new() == [good] and reader.forged == 3


def test_scrub_and_redact():
    env = {"ANTHROPIC_API_KEY": "sk-123456", "MODAL_TOKEN_ID": "ak-abcdef", "GH_PAT": "ghp_zzzzzz",
           "DB_PASSWORD": "hunter22", "MY_VAR": "plain-value", "PATH": "/usr/bin"}
    assert hygiene.scrub_env(env, ["MY_VAR"]) == {"PATH": "/usr/bin"}
    vals = hygiene.secret_values(env)
    assert hygiene.redact({"m": ["x sk-123456 y", "hunter22"]}, vals) == {"m": ["x *** y", "***"]}
    assert "/usr/bin" not in vals


SHM = Path("/dev/shm")


def _torch_shm() -> set[str]:
    return {f for f in os.listdir(SHM) if f.startswith("torch_")} if SHM.is_dir() else set()


@pytest.mark.skipif(not SHM.is_dir(), reason="no /dev/shm")
def test_a_job_leaves_no_shared_memory_behind(tmp_env, monkeypatch):
    # The judge hands a CPU kernel its inputs through shared memory (torch's file_system strategy: a
    # file /dev/shm/torch_<pid>_... per tensor). Its processes end with os._exit or a kill, so nothing
    # unlinked them: 19 files a job on this target, 33,355 files (692 MB of RAM) in /dev/shm after a
    # day of this machine's test runs, and an overnight loop would fill it. The job's own processes
    # (the judge and its kernels, as the runner ends them) must leave none.
    pids: list[int] = []
    end = runner._end

    def ending(proc, children, tag):
        pids.extend([proc.pid, *children])
        end(proc, children, tag)

    monkeypatch.setattr(runner, "_end", ending)
    out = runner.run_worker(job({"candidate": cheat("honest")}), tmp_env, 300)
    assert all(r["status"] == Status.PASSED for r in out["labels"]["candidate"].values()), out["labels"]
    assert len(pids) >= 2, pids  # the judge and the candidate's process
    left = sorted(f for f in _torch_shm() if int(f.split("_")[1]) in pids)
    assert not left, f"{len(left)} file(s) of the job's ended processes left in /dev/shm: {left[:5]}"


def test_stale_temp_folders_of_dead_owners_are_swept(tmp_path):
    import subprocess
    import sys
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    old, live = tmp_path / "autogk-job-old", tmp_path / "autogk-job-live"
    # Each folder's job left shared memory behind (its runner was killed before it could unlink it):
    # the dead owner's goes with its folder, the live one's stays, and so does that of a pid the old
    # job listed which a live process holds now (this one: a pid used again since).
    shm = {old: SHM / f"torch_{2 ** 22 + 7}_123_0", live: SHM / f"torch_{2 ** 22 + 9}_123_0"}  # no pid here
    reused = SHM / f"torch_{os.getpid()}_123_0"
    try:
        for d, pid in ((old, dead), (live, str(os.getpid()))):
            d.mkdir()
            (d / folders.OWNER_FILE).write_text(pid)
            folders.note_pids(d, [int(shm[d].name.split("_")[1])] + ([os.getpid()] if d == old else []))
            shm[d].write_bytes(b"x")
            os.utime(d, (time.time() - 3600, time.time() - 3600))
        reused.write_bytes(b"x")
        removed = folders.sweep_stale(tmp_path)
        assert removed == [old] and live.exists() and not old.exists()
        assert not shm[old].exists() and shm[live].exists() and reused.exists()
    finally:
        for f in [*shm.values(), reused]:
            f.unlink(missing_ok=True)


def test_only_the_folders_of_dead_shared_memory_managers_are_swept():
    # torch_shm_manager binds TMPDIR/torch-shm-dir-*/manager.sock; killed at its job's end, it left the
    # folder behind (one a job). A manager alive (its socket bound) and one starting (no socket yet) keep
    # theirs. A short root: a Unix socket's path holds at most 107 bytes, which tmp_path may not leave.
    import socket
    root = Path(tempfile.mkdtemp(prefix="ag-shm-", dir="/tmp"))
    live = socket.socket(socket.AF_UNIX)
    try:
        dirs = {k: root / f"torch-shm-dir-{k}" for k in ("dead", "live", "starting")}
        for d in dirs.values():
            d.mkdir()
        live.bind(str(dirs["live"] / "manager.sock"))
        gone = socket.socket(socket.AF_UNIX)
        gone.bind(str(dirs["dead"] / "manager.sock"))
        gone.close()  # its file stays, unbound: what a killed manager leaves
        (root / "torch_other").mkdir()  # not a manager's folder
        assert folders.dead_shm_managers(root) == [dirs["dead"]]
        assert sorted(p.name for p in root.iterdir()) == ["torch-shm-dir-live", "torch-shm-dir-starting", "torch_other"]
    finally:
        live.close()
        shutil.rmtree(root, ignore_errors=True)


def test_a_killed_runner_takes_its_judge_and_kernels_with_it(tmp_path, tmp_env):
    """kill -9 of the process running a job: the judge dies with it (PR_SET_PDEATHSIG), and the
    judge's end takes the kernel's process along."""
    import subprocess
    import sys
    pidfile = tmp_path / "daemon.pids"
    script = tmp_path / "drive.py"
    script.write_text(
        "import json, sys, os\n"
        f"sys.path.insert(0, {str(Path(__file__).resolve().parents[1])!r})\n"
        "from autogk_git.bench import runner\n"
        f"job = json.loads({json.dumps(json.dumps(job({'candidate': cheat('detached_child')}, workloads=WLS[:1])))})\n"
        "runner.run_worker(job, dict(os.environ), 300)\n")
    proc = subprocess.Popen([sys.executable, str(script)], env=NO_SANDBOX(dict(tmp_env, AUTOGK_TEST_PIDFILE=str(pidfile))))
    deadline = time.monotonic() + 90
    while not pidfile.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert pidfile.exists()
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    pids = [int(p) for p in pidfile.read_text().split()]
    gone = time.monotonic() + 15
    alive = pids
    while alive and time.monotonic() < gone:
        time.sleep(0.3)
        alive = [p for p in pids if _alive(p)]
    assert not alive


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie waiting for its (dead) parent's reaper counts as dead
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def test_a_kernel_cannot_tell_whether_it_runs_as_the_parent_or_the_candidate(tmp_env):
    """Nothing the kernel's process can read names its role: a kernel that ran slowly as the parent
    would make every candidate look faster."""
    out = runner.run_worker(job({"parent": cheat("knows_its_role"), "candidate": cheat("knows_its_role")}),
                            tmp_env, 300)
    for label in ("parent", "candidate"):
        assert {r["status"] for r in out["labels"][label].values()} == {Status.PASSED}, out["labels"][label]


def _holds(cap: int) -> bool:
    """Whether this process's effective capabilities include `cap` (CAP_SYS_NICE is 23)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            return bool(int(line.split()[1], 16) >> cap & 1)
    return False


@pytest.mark.skipif(not Path("/proc/self/status").exists() or not _holds(23),
                    reason="the judge runs without root's powers here: none to drop")
def test_a_kernel_run_by_a_root_judge_holds_none_of_roots_powers(tmp_env):
    """On the GPU machines the judge runs as root, and a kernel's process was root with every
    capability: through NVML it could lock the GPU's clocks low outside its own calls and slow its
    parent's windows, which every timer would then see as the parent's time. Its process now drops all
    capabilities (and the bounding set, and root's regaining them on exec) before the kernel is
    imported; the environment record says so. The planted kernel shows any power it still has."""
    out = runner.run_worker(job({"parent": cheat("honest"), "candidate": cheat("uses_root_powers")}), tmp_env, 300)
    assert {r["status"] for r in out["labels"]["candidate"].values()} == {Status.PASSED}, out["labels"]["candidate"]
    assert all(s.endswith("; capabilities dropped") for s in out["environment"]["sandbox"]), out["environment"]
