"""`kill -9` of `autogk iterate` at 20 random moments, MLflow on: git stays whole and `autogk sync`
leaves MLflow with exactly one run per experiment note.

The moments are seeded: each kill comes a random delay after a random line of the loop's output, so
they land in every phase (proposing, committing, benchmarking, writing the note, logging the run,
merging or archiving, resuming what the previous kill left) rather than mostly inside the benchmark,
which is where a plain random delay would fall. Each run starts by resuming what the last one left.

The other tests pin states a kill leaves that random moments reach too rarely to rely on: a run
created but not finished, a store killed while MLflow creates its tables, a `git worktree add` cut
short, a lock file of a killed git.
"""
from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from conftest import BIN, autogk_in, git, without_store

KILLS = 20
# KILL_SEED=N picks other moments (to hunt for a failure: a failing seed reproduces the kill points,
# though not the exact timing); KILL_GROUP=1 kills the loop's whole process group, git included;
# KILL_LOG=FILE keeps what each killed loop printed.
SEED = int(os.environ.get("KILL_SEED", "20261130"))
# A tunable the kernel does not use: a tune space that 20 interrupted loops cannot exhaust.
SPARE = "SPARE = 0  # autogk: tune [" + ", ".join(map(str, range(64))) + "]\n"


@pytest.fixture
def project(small_project):
    """Two workloads (conftest.small_project: the quick stage covers both, one worker run per experiment)."""
    return small_project


def small_target(project: Path) -> None:
    """A wide tune space on the two-workload project."""
    kernel = project / "kernels" / "scale" / "kernel.py"
    mask = "MASK = True  # autogk: tune [True, False]\n"
    # After MASK, so the tuner tries MASK = False (incorrect: a revert) between keeps.
    kernel.write_text(kernel.read_text().replace(mask, mask + SPARE, 1))
    git(project, "commit", "-qam", "tests: a wide tune space")


# Where a kill lands: a random delay after the first output line matching one of these (None: after
# the start). Each phase is equally likely, instead of mostly the benchmark, which takes longest.
KILL_AFTER = [
    None,
    "recovered a stale lock|proposing",   # resuming, or the agent is editing in its worktree
    "committed",                          # the commit is made (or a resumed benchmark starts)
    "quick: ",                            # the worker runs
    "PASSED|INCORRECT",                   # the worker is done: the verdict and the note come next
    ": KEEP - |: REVERT - ",              # the note is written: MLflow logging, then merge or archive
    " kept: | reverted: ",                # concluded: the next experiment opens
]


def kill_at_random(project: Path, rng: random.Random, group: bool = False) -> tuple[str, bool]:
    """Start `autogk iterate`, SIGKILL it at a random moment. Returns (output, killed): a loop that
    ended by itself first was not killed.

    The kill hits the loop's process alone: a git command or worker it started runs to its end.
    group=True kills the whole process group instead (`kill -9 -PGID`), so git itself may die
    mid-command; a killed `git merge` in the trunk's checkout then leaves git's own lock files, which
    git asks a person to remove (see test_a_lock_file_left_by_a_killed_git_names_the_fix)."""
    marker, delay = rng.choice(KILL_AFTER), rng.uniform(0.0, 0.6)
    if marker is None:
        delay = rng.uniform(0.0, 1.5)
    proc = subprocess.Popen([str(BIN / "autogk"), "iterate", "-n", "100", "--agent", "tune"], cwd=project,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=dict(os.environ, PYTHONUNBUFFERED="1"), start_new_session=True)
    out: list[str] = []
    seen = threading.Event()

    def read() -> None:
        for ln in proc.stdout:
            out.append(ln)
            if marker and re.search(marker, ln):
                seen.set()
        seen.set()  # ended by itself

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    if marker:
        seen.wait(timeout=60)
    time.sleep(delay)
    killed = proc.poll() is None
    if killed and group:
        os.killpg(proc.pid, signal.SIGKILL)
    elif killed:
        proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    reader.join(timeout=30)
    proc.stdout.close()
    text = "".join(out)
    assert "Traceback" not in text and "crashed" not in text, text
    assert not killed or proc.returncode == -signal.SIGKILL, text
    what = "group" if group else "process"
    return f"[killed={killed} ({what}) {delay:.2f} s after {marker!r}]\n{text}", killed


def active_runs(project: Path) -> list[dict]:
    """The active (not superseded or deleted) runs of autogk/scale, read straight from the store."""
    from mlflow.tracking import MlflowClient
    client = MlflowClient(tracking_uri=f"sqlite:///{project}/mlruns/mlflow.db")
    exp = client.get_experiment_by_name("autogk/scale")
    assert exp is not None, "no MLflow experiment autogk/scale"
    return [{"number": int(r.data.tags["autogk.number"]), "commit": r.data.tags["autogk.commit"],
             "verdict": r.data.tags.get("autogk.verdict"), "status": r.info.status}
            for r in client.search_runs([exp.experiment_id], max_results=5000)]


def live_notes(project: Path) -> dict[int, list[str]]:
    """experiment number -> the commits with a result note that a ref still reaches."""
    from autogk_git.record.notes import parse_result
    out: dict[int, list[str]] = {}
    for line in git(project, "notes", "--ref", "autogk/results", "list").splitlines():
        _, commit = line.split()
        if not git(project, "for-each-ref", "--count=1", "--contains", commit).strip():
            continue  # amended or replayed away: its run is superseded, not counted
        res = parse_result(git(project, "notes", "--ref", "autogk/results", "show", commit), commit)
        assert res is not None and res["commit"] == commit, commit
        out.setdefault(res["experiment"], []).append(commit)
    return out


def check_reconciled(project: Path) -> dict[int, str]:
    """Git whole, every concluded experiment noted once, MLflow one active run per note. Returns
    number -> commit of the concluded experiments."""
    fsck = subprocess.run(["git", "fsck", "--strict", "--no-dangling"], cwd=project, capture_output=True, text=True)
    assert fsck.returncode == 0 and not fsck.stdout.strip(), fsck.stdout + fsck.stderr
    assert git(project, "branch", "--list", "autogk/*").strip() == ""
    assert len(git(project, "worktree", "list").splitlines()) == 1
    assert not list((project / ".git").rglob("*.lock")), list((project / ".git").rglob("*.lock"))
    assert not (project / ".git" / "autogk" / "loop.lock").exists()
    assert not any((project / ".git" / "autogk" / "worktrees").glob("*")), "a worktree folder is left"

    concluded: dict[int, str] = {}
    for line in git(project, "for-each-ref", "--format=%(refname) %(objectname)", "refs/autogk/").splitlines():
        name, sha = line.split()
        number = int(name.rsplit("/", 1)[-1])
        assert number not in concluded, f"#{number} is both kept and archived"
        concluded[number] = sha
    assert sorted(concluded) == list(range(1, len(concluded) + 1)), sorted(concluded)   # no gap
    notes = live_notes(project)
    assert {n: [c] for n, c in concluded.items()} == notes, (concluded, notes)          # one note each
    kept = {int(n.rsplit("/", 1)[-1]) for n in git(project, "for-each-ref", "--format=%(refname)",
                                                   "refs/autogk/kept/").split()}
    merges = git(project, "log", "--first-parent", "--merges", "--format=%B%x00", "main")
    assert all(merges.count(f"Autogk-Experiment: {n}\n") == (n in kept) for n in concluded), merges

    runs = active_runs(project)
    by_number: dict[int, list[dict]] = {}
    for r in runs:
        by_number.setdefault(r["number"], []).append(r)
    dup = {n: rs for n, rs in by_number.items() if len(rs) > 1}
    assert not dup, f"experiments with more than one active MLflow run: {dup}"
    assert {n: rs[0]["commit"] for n, rs in by_number.items()} == concluded, (by_number, concluded)
    assert all(r["status"] == "FINISHED" and r["verdict"] in ("keep", "revert") for r in runs), runs
    return concluded


@pytest.mark.slow(60)
def test_twenty_random_kills_leave_git_whole_and_mlflow_reconciled(project):
    without_store(project)  # the first logging builds it: a kill may land there too
    small_target(project)
    rng = random.Random(SEED)
    log, kills, t0 = [], 0, time.monotonic()
    while kills < KILLS:
        text, killed = kill_at_random(project, rng, group=os.environ.get("KILL_GROUP") == "1")
        log.append(text)
        kills += killed
        assert len(log) < 2 * KILLS, "the loop kept ending by itself:\n" + "\n".join(log)
    t_loop = time.monotonic() - t0
    Path(os.environ.get("KILL_LOG", os.devnull)).write_text("\n".join(log))
    # Conclude what the last kill left (no new experiment), then reconcile MLflow with the notes.
    autogk_in(project, "iterate", "-n", "0", "--max-time", "0.001", "--agent", "tune")
    synced = json.loads(autogk_in(project, "sync", "--json").stdout)
    concluded = check_reconciled(project)
    assert len(concluded) >= 3, "\n".join(log)   # the loop got somewhere between the kills
    assert synced["notes"] >= len(concluded)
    # Sync is safe to run again: nothing more to log, nothing duplicated.
    again = json.loads(autogk_in(project, "sync", "--json").stdout)
    assert again["logged"] == 0, again
    assert check_reconciled(project) == concluded
    print(f"{kills} kills, {len(concluded)} experiments, {synced['logged']} logged by sync, "
          f"{t_loop:.1f} s + {time.monotonic() - t0 - t_loop:.1f} s")


def test_a_run_cut_short_by_a_kill_is_completed_by_sync_not_duplicated(project):
    """A kill inside MLflow logging, after the run was created and before it was finished, leaves a run
    with the commit's tag but no figures or artifacts: sync completes that run rather than skip it
    (it has the tag) or add a second one."""
    small_target(project)
    autogk_in(project, "iterate", "-n", "1", "--agent", "tune", env={"AUTOGK_TRACKING_ENABLED": "false"})
    from autogk_git.project import Project
    from autogk_git.record.notes import parse_result
    from autogk_git.tracking import mlflow_store
    [line] = git(project, "notes", "--ref", "autogk/results", "list").splitlines()
    commit = line.split()[1]
    result = parse_result(git(project, "notes", "--ref", "autogk/results", "show", commit), commit)
    proj = Project.find(project)
    # What log_result has done when the kill comes: the run exists, tagged, and nothing else.
    client = mlflow_store._client(proj)
    exp_id = mlflow_store._experiment_id(client, proj, "scale")
    client.create_run(exp_id, tags=mlflow_store._tags(result))
    doctor = autogk_in(project, "doctor", check=False).stdout
    assert "have a result note but no MLflow run (e.g. scale #0001): autogk sync" in doctor, doctor
    synced = json.loads(autogk_in(project, "sync", "--json").stdout)
    assert synced["logged"] == 1, synced
    [run] = client.search_runs([exp_id])
    assert run.info.status == "FINISHED" and run.data.metrics, run
    assert "result.json" in [a.path for a in client.list_artifacts(run.info.run_id)]
    assert check_reconciled(project) == {1: commit}


def test_a_kill_while_the_store_is_created_leaves_no_broken_store(project, own_cache):
    """MLflow builds a store's tables in a chain of migrations (seconds), once per MLflow version for a
    user (the empty store in the user's cache, which each new store copies): a kill in between must leave
    neither a store nor an empty store that later commands refuse."""
    without_store(project)
    small_target(project)
    autogk_in(project, "iterate", "-n", "1", "--agent", "tune", env={"AUTOGK_TRACKING_ENABLED": "false"})
    mlruns = project / "mlruns"
    empties = own_cache / "mlflow-stores"
    assert not (mlruns / "mlflow.db").exists()
    proc = subprocess.Popen([str(BIN / "autogk"), "sync"], cwd=project, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not list(empties.glob("*.db*")) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.3)  # inside the migrations, which take seconds
        assert proc.poll() is None, ("sync ended before it could be killed while creating the store",
                                     list(empties.iterdir()), list(mlruns.iterdir()) if mlruns.exists() else None)
        assert not list(mlruns.glob("*mlflow.db*")), "the project's store was made before the empty one"
    finally:
        proc.kill()
        proc.wait()
    assert [p.name for p in empties.iterdir() if not p.name.startswith(".")] == []  # nothing half built
    out = autogk_in(project, "sync", "--json", check=False)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["logged"] == 1
    assert [p.name for p in mlruns.iterdir() if "mlflow.db" in p.name] == ["mlflow.db"]  # nothing half built
    assert [p.name for p in empties.iterdir()] != [] and not list(empties.glob(".*"))  # built whole this time
    assert len(check_reconciled(project)) == 1


def test_a_worktree_add_cut_short_does_not_block_the_next_experiment(project):
    """`git worktree add` killed mid-way leaves the worktree registered and locked ("initializing"),
    its folder missing: the next loop discards it and runs the experiment."""
    small_target(project)
    path = project / ".git" / "autogk" / "worktrees" / "scale-0001"
    git(project, "worktree", "add", "-q", "-b", "autogk/scale/0001-wip", str(path), "main")
    admin = Path(git(path, "rev-parse", "--git-dir").strip())
    (admin / "locked").write_text("initializing\n")
    subprocess.run(["rm", "-rf", str(path)], check=True)
    out = autogk_in(project, "iterate", "-n", "1", "--agent", "tune", env={"AUTOGK_TRACKING_ENABLED": "false"}).stdout
    assert "#0001: stopped before its commit; discarding the empty branch" in out, out
    assert "#0001 kept" in out, out
    assert git(project, "branch", "--list", "autogk/*").strip() == ""
    assert len(git(project, "worktree", "list").splitlines()) == 1


def test_a_lock_file_left_by_a_killed_git_names_the_fix(project):
    """A `git merge` killed with the loop (its process group) leaves `.git/HEAD.lock`; git removes no lock
    it did not make, so the merge of the next kept experiment fails. The error names the file and the
    fix; after it, the loop merges the kept experiment, which was never lost."""
    small_target(project)
    lock = project / ".git" / "HEAD.lock"
    lock.write_text("")
    env = {"AUTOGK_TRACKING_ENABLED": "false"}
    out = autogk_in(project, "iterate", "-n", "1", "--agent", "tune", check=False, env=env)
    assert out.returncode == 1 and "could not merge the kept experiment" in out.stderr, out.stderr
    assert f"hint: a git lock file is in the way: {lock}" in out.stderr and f"rm '{lock}'" in out.stderr
    assert git(project, "rev-parse", "refs/autogk/kept/scale/0001").strip()        # kept, not lost
    lock.unlink()                                                                   # what the hint says
    again = autogk_in(project, "iterate", "-n", "0", "--max-time", "0.001", "--agent", "tune", env=env).stdout
    assert "#0001 kept: merged into main" in again, again
    assert "Autogk-Experiment: 1\n" in git(project, "log", "-1", "--format=%B", "main")


def test_resume_logs_the_run_of_an_experiment_whose_note_was_written_without_one(project):
    """The state a kill between the note and the run leaves (here made without a kill: the hook
    benchmarks a hand-made experiment with MLflow off): the next `iterate` resumes it and logs its
    run itself, so the table is whole before any `autogk sync`."""
    without_store(project)
    git(project, "checkout", "-qb", "autogk/scale/0001-smaller-block")
    k = project / "kernels" / "scale" / "kernel.py"
    k.write_text(k.read_text().replace("BLOCK = 64", "BLOCK = 32"))
    subprocess.run(["git", "commit", "-qam", "smaller block"], cwd=project, check=True,
                   env={**os.environ, "AUTOGK_BENCH_HOOK_MODE": "foreground", "AUTOGK_TRACKING_ENABLED": "false"})
    sha = git(project, "rev-parse", "HEAD").strip()
    assert git(project, "notes", "--ref", "autogk/results", "list", sha).strip()  # the note is there
    assert not (project / "mlruns" / "mlflow.db").exists()                         # no run anywhere
    out = autogk_in(project, "iterate", "-n", "0", "--agent", "tune", "--max-time", "0.001").stdout
    assert "#0001: its MLflow run is missing or cut short; logging it" in out, out
    runs = active_runs(project)
    assert [(r["number"], r["commit"], r["status"]) for r in runs] == [(1, sha, "FINISHED")], runs
    # Resumed again (nothing left open) or synced: still one run.
    autogk_in(project, "iterate", "-n", "0", "--agent", "tune", "--max-time", "0.001")
    assert json.loads(autogk_in(project, "sync", "--json").stdout)["logged"] == 0
    assert len(active_runs(project)) == 1
