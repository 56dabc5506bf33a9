"""The slurm backend against a real single-node SLURM cluster on 127.0.0.1 (slurmctld, slurmd, munged).

The cluster is the one SLURM_CONF names when it answers (`.ci/run` starts one), else one this module
starts for the session with scripts/slurm-local.sh. Jobs run the interpret backend inside, on the CPU
partition. Faults are made from outside as a person would: `scancel`, `scontrol update ... state=down`,
a partition set down so that jobs wait in the queue.
"""
from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from conftest import BIN, REPO, git, notes_json

CLUSTER_SCRIPT = REPO / "scripts" / "slurm-local.sh"
PARTITION = "cpu"  # the partition scripts/slurm-local.sh makes


# ------------------------------------------------------------------------------------------------
# The cluster
# ------------------------------------------------------------------------------------------------

def _answers(conf: str) -> bool:
    try:
        out = subprocess.run(["sinfo", "-h", "-p", PARTITION, "-o", "%T"], capture_output=True, text=True,
                             timeout=20, env={**os.environ, "SLURM_CONF": conf})
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and bool(out.stdout.strip())


def _packages() -> str | None:
    """None when SLURM and munge are installed (installing them where this process may); else why not."""
    need = ("munged", "slurmctld", "slurmd", "sbatch")
    if all(shutil.which(x) for x in need):
        return None
    if os.geteuid() == 0 and shutil.which("apt-get"):
        try:
            subprocess.run(["apt-get", "install", "-y", "-qq", "slurm-wlm", "munge"], capture_output=True,
                           timeout=600, env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
        except (OSError, subprocess.TimeoutExpired):
            pass
        if all(shutil.which(x) for x in need):
            return None
    return ("SLURM is not installed and could not be installed here "
            "(as root: apt-get install -y slurm-wlm munge; or run .ci/run)")


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory):
    """SLURM_CONF of a live single-node cluster with partition `cpu`."""
    conf = os.environ.get("SLURM_CONF", "")
    if conf and Path(conf).is_file() and _answers(conf):
        yield conf
        return
    why = _packages()
    if why:
        pytest.skip(why)
    if os.geteuid() != 0:
        pytest.skip("the test cluster runs its daemons as root (SlurmUser=root); run the SLURM tests as root")
    d = tmp_path_factory.mktemp("slurm")
    out = subprocess.run(["bash", str(CLUSTER_SCRIPT), "start", str(d)], capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, f"the test cluster did not start:\n{out.stdout}{out.stderr}"
    try:
        yield str(d / "slurm.conf")
    finally:
        subprocess.run(["bash", str(CLUSTER_SCRIPT), "stop", str(d)], capture_output=True, timeout=60)


def scontrol(*args: str) -> None:
    subprocess.run(["scontrol", *args], capture_output=True, text=True, timeout=30)


def node_state() -> str:
    return subprocess.run(["sinfo", "-h", "-n", "localhost", "-o", "%T"], capture_output=True, text=True,
                          timeout=30).stdout.strip()


def heal() -> None:
    """Partition up, node back in service: each test starts from a working cluster."""
    scontrol("update", f"partitionname={PARTITION}", "state=up")
    if not node_state().startswith(("idle", "mixed", "allocated", "planned")):
        scontrol("update", "nodename=localhost", "state=resume")
    for _ in range(120):
        if node_state().startswith(("idle", "mixed", "allocated", "planned")):
            return
        time.sleep(0.5)
    raise AssertionError(f"the test cluster's node did not come back: {node_state()}")


def our_jobs() -> list[dict[str, str]]:
    """Live jobs autogk submitted (comment autogk:<key>)."""
    out = subprocess.run(["squeue", "-h", "-O", "JobID:|,State:|,Reason:|,Comment:|,Name:|"], capture_output=True,
                         text=True, timeout=30).stdout
    rows = [dict(zip(("id", "state", "reason", "comment", "name"), (p.strip() for p in line.split("|"))))
            for line in out.splitlines() if line.strip()]
    return [r for r in rows if r["comment"].startswith("autogk:")]


@pytest.fixture
def one_slurm_test_at_a_time():
    """The tests share one cluster and change it for everyone (the partition taken down, the node drained,
    every autogk job cancelled before a test starts): two at once on two pytest workers cancelled each
    other's jobs and read each other's (a loaded 2-core machine, 2026-12-02). A lock on one file, whatever
    worker a test runs on."""
    with open(Path(tempfile.gettempdir()) / "autogk-slurm-tests.lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@pytest.fixture
def slurm(one_slurm_test_at_a_time, slurm_cluster, monkeypatch, tmp_path):
    """This test's settings: the slurm backend, interpret inside, one CPU a job, its own shared folder."""
    monkeypatch.setenv("SLURM_CONF", slurm_cluster)
    heal()
    for r in our_jobs():  # a job a failed test left behind must not take this test's CPUs
        subprocess.run(["scancel", r["id"]], capture_output=True, timeout=30)
    shared = tmp_path / "shared"
    for k, v in {"AUTOGK_BENCH_BACKEND": "slurm", "AUTOGK_SLURM_INSIDE": "interpret", "AUTOGK_SLURM_CPUS": "1",
                 "AUTOGK_SLURM_PARTITION": PARTITION, "AUTOGK_SLURM_POLL_S": "0.5",
                 "AUTOGK_SLURM_SHARED": str(shared), "AUTOGK_TRACKING_ENABLED": "false"}.items():
        monkeypatch.setenv(k, v)
    yield shared
    heal()


# ------------------------------------------------------------------------------------------------
# Helpers
# ------------------------------------------------------------------------------------------------

def start_iterate(project: Path, log: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen([str(BIN / "autogk"), "iterate", *args], cwd=project, stdout=open(log, "w"),
                            stderr=subprocess.STDOUT, env=dict(os.environ), start_new_session=True)


def wait_for_text(log: Path, text: str, proc: subprocess.Popen | None = None, limit_s: float = 240) -> str:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        seen = log.read_text()
        if text in seen:
            return seen
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"autogk exited {proc.returncode} before printing {text!r}:\n{seen}")
        time.sleep(0.3)
    raise AssertionError(f"no {text!r} within {limit_s:.0f} s:\n{log.read_text()}")


def result_notes(project: Path) -> list[str]:
    out = git(project, "notes", "--ref", "autogk/results", "list")
    return [line.split()[1] for line in out.splitlines() if line.strip()]


def experiment_commits(project: Path) -> dict[int, str]:
    """Experiment number -> the commit that has its result note."""
    out = {}
    for sha in result_notes(project):
        res = notes_json(project, sha)
        assert res["experiment"] not in out, f"experiment {res['experiment']} has two result notes"
        out[res["experiment"]] = sha
    return out


SLOW_KERNEL = '''
import os
import time
from pathlib import Path

import triton
import triton.language as tl

HOLD = Path({hold!r})  # while this file exists, every call waits


@triton.jit
def _scale_kernel(x_ptr, b_ptr, out_ptr, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * scale + tl.load(b_ptr + offs, mask=mask), mask=mask)


def run(x, bias, scale, out):
    while HOLD.exists():
        time.sleep(0.2)
    n = x.numel()
    _scale_kernel[(triton.cdiv(n, 128),)](x, bias, out, n, scale, BLOCK=128)
'''


def backend_job(project: Path, hold: Path, seed: int = 0x1234abcd):
    """A slurm backend from the project's config and a one-workload job whose kernel waits on `hold`
    (seed: another makes another job, with a shared folder of its own)."""
    from autogk_git.bench.backends import get_backend
    from autogk_git.bench.job import make_job
    from autogk_git.project import Project
    p = Project(project)
    t = p.target("scale")
    job = make_job(t, "quick", {"candidate": {"kernel.py": SLOW_KERNEL.format(hold=str(hold))}}, t.workloads[:1],
                   {"trials": 1, "reps": 1, "warmup": 0, "timer": "cudagraph"}, seed=seed)
    return get_backend("slurm", p.config), job


def run_in_thread(backend, job, timeout_s: float = 600):
    box: dict = {}

    def go():
        try:
            box["out"] = backend.run(job, timeout_s)
        except BaseException as e:  # noqa: BLE001 - the test reads it
            box["error"] = e
    th = threading.Thread(target=go, daemon=True)
    th.start()
    return th, box


def wait_running(limit_s: float = 120, box: dict | None = None) -> dict[str, str]:
    """The first of our jobs that is RUNNING; box: run_in_thread's, whose end (an error, or a result that
    came without a job seen running) fails this at once and says what the backend returned."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        running = [r for r in our_jobs() if r["state"] == "RUNNING"]
        if running:
            return running[0]
        if box:
            raise AssertionError(f"the backend returned before a job was seen running: {box}")
        time.sleep(0.3)
    raise AssertionError(f"no autogk job running within {limit_s:.0f} s: {our_jobs()}")


def statuses(out: dict) -> set[str]:
    return {w["status"] for wls in out["labels"].values() for w in wls.values()}


# ------------------------------------------------------------------------------------------------
# The loop through SLURM
# ------------------------------------------------------------------------------------------------

def test_a_cpu_loop_runs_each_stage_as_a_slurm_job_and_records_where(project, slurm, monkeypatch):
    monkeypatch.setenv("AUTOGK_TRACKING_ENABLED", "true")
    out = subprocess.run([str(BIN / "autogk"), "iterate", "-n", "1", "--json"], cwd=project, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SLURM job" in out.stderr and "running on localhost" in out.stderr
    (number, sha), = experiment_commits(project).items()
    res = notes_json(project, sha)
    assert res["backend"] == "slurm" and res["correct"] is True
    assert res["verdict"]["decision"] == "keep"  # the template project merges correct untimed candidates
    ids = set()
    for stage, s in res["stages"].items():
        info = s["slurm"]
        assert info["node"] == "localhost" and info["partition"] == PARTITION and info["state"] == "COMPLETED"
        assert info["queue_s"] >= 0
        ids.add(info["job_id"])
        assert all(w["status"] == "PASSED" for w in s["workloads"]["candidate"].values())
    # Untimed, the quick gate and the full check are one job: both stages name it, the first its cost.
    assert sorted(res["stages"]) == ["full", "quick"] and len(ids) == 1 and res["stages"]["quick"]["gpu_s"] > 0
    assert res["environment"]["slurm"]["job_id"] in ids
    assert not list(slurm.iterdir()), "the job folders are removed once their results are read"
    code = ("import json\nfrom mlflow.tracking import MlflowClient\n"
            f"c = MlflowClient(tracking_uri='sqlite:///{project}/mlruns/mlflow.db')\n"
            "e = c.get_experiment_by_name('autogk/scale')\n"
            "print(json.dumps([r.data.tags for r in c.search_runs([e.experiment_id])]))\n")
    tags, = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                      check=True).stdout)
    for stage, s in res["stages"].items():
        assert tags[f"autogk.slurm.{stage}"] == f"job {s['slurm']['job_id']} on localhost"


def test_parallel_2_keeps_two_slurm_jobs_running_at_once(project, slurm):
    out = subprocess.run([str(BIN / "autogk"), "iterate", "-n", "2", "--parallel", "2", "--json"], cwd=project,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "each benchmarked in its own SLURM job" in out.stderr
    exps = experiment_commits(project)
    assert sorted(exps) == [1, 2]
    quick = [notes_json(project, sha)["stages"]["quick"] for sha in exps.values()]
    spans = [(q["slurm"]["started"], q["slurm"]["started"] + q["gpu_s"]) for q in quick]
    # Both quick jobs ran side by side on the node's two CPUs: each started before the other ended.
    assert max(s for s, _ in spans) < min(e for _, e in spans), spans
    assert len({q["slurm"]["job_id"] for q in quick}) == 2


def test_two_loops_sharing_the_cluster_and_the_shared_folder_keep_to_their_own_jobs(project, slurm, tmp_path,
                                                                                    monkeypatch):
    # Two clones of one project by one person, committing at one fixed instant: both loops make the very
    # same experiment commits, so the jobs' contents and seeds match and only the project tells them apart.
    from autogk_git.git import hooks
    from autogk_git.record import refs
    other = tmp_path / "clone" / "proj"
    shutil.copytree(project, other, symlinks=True)
    hooks.install(other, refs.NOTES_GLOB)
    for k in ("GIT_AUTHOR_DATE", "GIT_COMMITTER_DATE"):
        monkeypatch.setenv(k, "2026-12-01T12:00:00+00:00")
    roots = (project, other)
    procs = [start_iterate(root, tmp_path / f"loop{i}.log", "-n", "2") for i, root in enumerate(roots)]
    for i, proc in enumerate(procs):
        assert proc.wait(timeout=900) == 0, (tmp_path / f"loop{i}.log").read_text()
    listed = subprocess.run(["squeue", "-h", "-t", "all", "-O", "JobID:|,Comment:|,Name:|"], capture_output=True,
                            text=True, timeout=30).stdout  # ended jobs stay listed for MinJobAge (300 s)
    jobs = {p[0].strip(): (p[1].strip(), p[2].strip()) for p in (line.split("|") for line in listed.splitlines())
            if len(p) > 2}
    seen: list[dict[str, tuple[str, str]]] = []
    for root in roots:
        exps = experiment_commits(root)  # one result note per experiment
        assert sorted(exps) == [1, 2]
        mine = {}
        for sha in exps.values():
            for stage, s in notes_json(root, sha)["stages"].items():
                info = s["slurm"]
                # Its own job, submitted by this loop and run to the end: none waited on, cancelled or resumed.
                assert info["state"] == "COMPLETED" and info["resumed"] is False and info["retries"] == 0, info
                assert info["job_id"] in jobs, f"job {info['job_id']} not in squeue -t all:\n{listed}"
                comment, name = jobs[info["job_id"]]
                assert name == f"autogk-quick-{sha[:8]}" and comment.startswith("autogk:")  # full: in quick's job
                mine[info["job_id"]] = (comment, name)
        seen.append(mine)
        git(root, "fsck", "--no-progress")
    assert sorted(experiment_commits(project).values()) == sorted(experiment_commits(other).values()), \
        "the clones' experiment commits differ: the case of two identical jobs is not tested"
    assert not seen[0].keys() & seen[1].keys(), "a SLURM job is recorded by both loops"
    comments = [{c for c, _ in m.values()} for m in seen]
    assert len(comments[0]) == len(seen[0]) and len(comments[1]) == len(seen[1])  # one key per job
    assert not comments[0] & comments[1], "the two loops' jobs share a key: one would wait on the other's job"
    assert not list(slurm.iterdir()), "job folders left in the shared folder"


# ------------------------------------------------------------------------------------------------
# Faults: each ends as a status, never a hang
# ------------------------------------------------------------------------------------------------

# A minute of SLURM's clock at least, mostly waiting: started first (conftest: `slow`) so that it is not the
# last test of its worker's slice, the other workers idle beside it (91 s of a 415 s suite, 2026-12-07); the
# other SLURM tests follow it on the same worker (conftest: LOCKED_FIXTURE).
@pytest.mark.slow(91)
def test_a_job_past_its_slurm_time_limit_is_a_timeout_status(project, slurm, monkeypatch, tmp_path):
    monkeypatch.setenv("AUTOGK_SLURM_TIME", "0:05")  # SLURM ends it at its next check, within about a minute
    hold = tmp_path / "hold"
    hold.write_text("")
    backend, job = backend_job(project, hold)
    t0 = time.monotonic()
    th, box = run_in_thread(backend, job)
    th.join(timeout=300)
    assert not th.is_alive(), "the backend still waits on a job SLURM ended"
    out = box["out"]
    assert statuses(out) == {"TIMEOUT"}
    msg = next(iter(out["labels"]["candidate"].values()))["message"]
    assert "hit its time limit (--time=0:05)" in msg and out["slurm"]["state"] == "TIMEOUT"
    assert time.monotonic() - t0 < 240
    assert not our_jobs()


def test_a_job_cancelled_from_outside_is_a_harness_error_not_a_pass(project, slurm, tmp_path):
    hold = tmp_path / "hold"
    hold.write_text("")
    backend, job = backend_job(project, hold)
    th, box = run_in_thread(backend, job)
    running = wait_running(box=box)
    assert running["name"] == "autogk-quick-1234abcd"  # the stage and the candidate's commit
    subprocess.run(["scancel", running["id"]], check=True, timeout=30)
    th.join(timeout=120)
    assert not th.is_alive()
    out = box["out"]
    assert statuses(out) == {"HARNESS_ERROR"}
    msg = next(iter(out["labels"]["candidate"].values()))["message"]
    assert f"SLURM job {running['id']}" in msg and "cancelled from outside" in msg
    assert out["slurm"]["state"] == "CANCELLED"


def test_a_node_set_down_during_a_job_is_retried_then_a_status(project, slurm, monkeypatch, tmp_path):
    hold = tmp_path / "hold"
    hold.write_text("")
    # With one retry: the node comes back, the job is submitted again and its result counts.
    monkeypatch.setenv("AUTOGK_SLURM_RETRIES", "1")
    backend, job = backend_job(project, hold)
    th, box = run_in_thread(backend, job)
    first = wait_running(box=box)
    scontrol("update", "nodename=localhost", "state=down", "reason=test")
    hold.unlink()  # the second attempt runs through
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not any(r["id"] != first["id"] for r in our_jobs()):
        time.sleep(0.3)
    heal()
    th.join(timeout=240)
    assert not th.is_alive()
    out = box["out"]
    assert statuses(out) == {"PASSED"}, out["labels"]
    assert out["slurm"]["retries"] == 1 and out["slurm"]["job_id"] != first["id"]
    # Without retries: the lost job is a harness error naming its end. Another job: the first's folder may
    # still get what its first submission's job (reported NODE_FAIL, yet running on) wrote late.
    monkeypatch.setenv("AUTOGK_SLURM_RETRIES", "0")
    hold.write_text("")
    backend, job = backend_job(project, hold, seed=0x1234abce)
    th, box = run_in_thread(backend, job)
    wait_running(box=box)
    scontrol("update", "nodename=localhost", "state=down", "reason=test")
    th.join(timeout=120)
    assert not th.is_alive()
    out = box["out"]
    assert statuses(out) == {"HARNESS_ERROR"} and out["slurm"]["state"] == "NODE_FAIL"
    assert "ended NODE_FAIL after 0 resubmission(s)" in next(iter(out["labels"]["candidate"].values()))["message"]


# ------------------------------------------------------------------------------------------------
# Ctrl-C, crash and resume
# ------------------------------------------------------------------------------------------------

def test_ctrl_c_cancels_the_loops_queued_job_and_iterate_resumes(project, slurm, tmp_path):
    scontrol("update", f"partitionname={PARTITION}", "state=down")  # jobs wait in the queue
    log = tmp_path / "first.log"
    proc = start_iterate(project, log, "-n", "1")
    wait_for_text(log, "queued (PartitionDown)", proc)  # the progress line carries squeue's reason
    assert len(our_jobs()) == 1
    os.killpg(proc.pid, signal.SIGINT)
    assert proc.wait(timeout=60) == 130, log.read_text()
    assert not our_jobs(), "Ctrl-C left the loop's job in the queue"
    heal()
    out = subprocess.run([str(BIN / "autogk"), "iterate", "-n", "1"], cwd=project, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    exps = experiment_commits(project)  # one note per experiment, none lost
    assert 1 in exps and notes_json(project, exps[1])["correct"] is True
    git(project, "fsck", "--no-progress")


def test_ctrl_c_in_parallel_cancels_every_job_the_loop_has_in_flight(project, slurm, tmp_path):
    scontrol("update", f"partitionname={PARTITION}", "state=down")
    log = tmp_path / "parallel.log"
    proc = start_iterate(project, log, "-n", "2", "--parallel", "2")
    deadline = time.monotonic() + 240
    while len(our_jobs()) < 2:  # both experiments' first jobs queued at once
        assert time.monotonic() < deadline and proc.poll() is None, log.read_text()
        time.sleep(0.3)
    os.killpg(proc.pid, signal.SIGINT)
    # The benchmark threads, not only the main one, stop: each cancels its own job.
    assert proc.wait(timeout=90) == 130, log.read_text()
    left = our_jobs()
    assert not left, f"Ctrl-C left the parallel loop's jobs in the queue: {left}\n{log.read_text()[-3000:]}"


def test_iterate_after_a_crash_waits_for_the_job_it_left_instead_of_submitting_again(project, slurm, tmp_path):
    scontrol("update", f"partitionname={PARTITION}", "state=down")
    log = tmp_path / "first.log"
    proc = start_iterate(project, log, "-n", "1")
    wait_for_text(log, "queued (PartitionDown)", proc)
    os.killpg(proc.pid, signal.SIGKILL)  # a crash: nothing of autogk's runs to cancel the job
    proc.wait(timeout=30)
    left, = our_jobs()
    log2 = tmp_path / "second.log"
    proc2 = start_iterate(project, log2, "-n", "1")
    wait_for_text(log2, f"SLURM job {left['id']}, left by an earlier run, is still pending; waiting for it", proc2)
    assert [r["id"] for r in our_jobs()] == [left["id"]], "a second job was submitted"
    heal()
    assert proc2.wait(timeout=600) == 0, log2.read_text()
    exps = experiment_commits(project)
    res = notes_json(project, exps[1])
    assert res["stages"]["quick"]["slurm"]["job_id"] == left["id"]
    assert res["stages"]["quick"]["slurm"]["resumed"] is True
    git(project, "fsck", "--no-progress")


# ------------------------------------------------------------------------------------------------
# doctor
# ------------------------------------------------------------------------------------------------

def test_doctor_checks_the_cluster_the_partition_and_the_shared_folder_from_a_compute_node(project, slurm,
                                                                                          monkeypatch):
    out = subprocess.run([str(BIN / "autogk"), "doctor"], cwd=project, capture_output=True, text=True, timeout=300)
    assert f"SLURM partition {PARTITION}: up, 1 node(s)" in out.stdout, out.stdout
    assert f"shared folder {slurm}: writable here" in out.stdout
    assert "sees the shared folder and imports autogk" in out.stdout
    assert "problem: SLURM" not in out.stdout
    monkeypatch.setenv("AUTOGK_SLURM_PARTITION", "gpu")
    out = subprocess.run([str(BIN / "autogk"), "doctor"], cwd=project, capture_output=True, text=True, timeout=300)
    assert out.returncode == 1
    assert "problem: SLURM: [slurm] partition gpu is not one of sinfo's: cpu; set [slurm] partition" in out.stdout
    monkeypatch.setenv("AUTOGK_SLURM_PARTITION", PARTITION)
    monkeypatch.setenv("AUTOGK_SLURM_INSIDE", "local")
    monkeypatch.setenv("AUTOGK_SLURM_GRES", "gpu:1")
    out = subprocess.run([str(BIN / "autogk"), "doctor"], cwd=project, capture_output=True, text=True, timeout=300)
    assert "asks for 1 GPU(s), but partition cpu's nodes have 0" in out.stdout
