"""Hermetic test setup: temporary HOME and git config, real temporary repositories, no network."""
from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Callable

import pytest

# A suite started as a background job (`cmd &` in a script) inherits SIGINT ignored, and so would every
# autogk it starts: the Ctrl-C tests would send a signal nothing hears. A Python handler here is reset
# to the default at exec, so the children hear Ctrl-C as a user's terminal would deliver it.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# One CPU thread for torch's operations in every process of the run (pytest's workers, and through the
# environment every judge, kernel process, reference check and interpreter script they start): the
# suite runs one xdist worker more than the cores, so torch's own threads would only take turns on the
# same cores, and OpenMP's idle threads spin while they wait. The interpreter check of the bundled
# indexer took 5.6 CPU-s with torch's default threads and 3.2 with one, on this project's 2-core
# machine (benchmarks/RESULTS.md, 2026-12-06). A value already set is kept.
os.environ.setdefault("OMP_NUM_THREADS", "1")
if "torch" in sys.modules:  # imported before this file (a plugin): its pool may be sized already
    sys.modules["torch"].set_num_threads(int(os.environ["OMP_NUM_THREADS"]))

# Bytecode written, even where the shell says not to (PYTHONDONTWRITEBYTECODE, set on this project's dev
# machine): the suite starts ~600 Python processes (autogk's commands, hooks, judges, reference checks)
# that would each compile the package's modules again, and each xdist worker would rewrite every test
# module's assertions again. tests/test_init.py and tests/loop/test_search_tree.py from a tree without
# bytecode: 52.0 and 54.6 s with it set, 49.0 and 47.2 s without (2-core dev VM, 2026-12-07).
if os.environ.pop("PYTHONDONTWRITEBYTECODE", None) is not None:
    sys.dont_write_bytecode = False

REPO = Path(__file__).resolve().parents[1]
DATA = Path(__file__).resolve().parent / "data"
SHARED = REPO.parent / "shared" / "flashinfer-trace-v0.1.2"
BIN = Path(sys.executable).parent


@pytest.fixture(autouse=True)
def hermetic(tmp_path_factory, monkeypatch):
    home = tmp_path_factory.mktemp("home")
    gitconfig = home / ".gitconfig"
    gitconfig.write_text("[user]\n\tname = Test Person\n\temail = test@example.com\n"
                         "[init]\n\tdefaultBranch = main\n[advice]\n\tdetachedHead = false\n")
    monkeypatch.setenv("HOME", str(home))
    # The reference's records (bench/refcheck.py, bench/refproof.py) and the empty MLflow store
    # (tracking/store.py) are kept for every project of a user: one user's cache for the whole run, as on
    # a user's machine (a test that needs an empty one asks for `own_cache`).
    cache = home / ".cache" / "autogk"
    cache.mkdir(parents=True)
    for name in SHARED_CACHES:
        shared = run_folder(tmp_path_factory) / "reference-cache" / name
        shared.mkdir(parents=True, exist_ok=True)
        (cache / name).symlink_to(shared)
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(gitconfig))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    monkeypatch.setenv("PATH", f"{BIN}{os.pathsep}{os.environ['PATH']}")
    for k in list(os.environ):  # AUTOGK_TEST_* are the tests' own (a trace folder), read by no command
        if (k.startswith(("AUTOGK_", "ANTHROPIC_", "MODAL_", "GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX"))
                and not k.startswith("AUTOGK_TEST_")):
            monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("AUTOGK_BENCH_HOOK_MODE", "foreground")
    # The command agent's walk of the judge's Python environment (~100,000 files) around each run: on in
    # tests/agents/test_agent_pyenv.py, which sets its own roots, off elsewhere.
    monkeypatch.setenv("AUTOGK_AGENT_WATCH_PYTHON", "false")
    yield


SHARED_CACHES = ("reference-proofs", "reference-checks", "mlflow-stores", "fib-accepted")


def run_folder(tmp_path_factory) -> Path:
    """This test run's folder, the same for every xdist worker (each worker's basetemp is popen-gwN in it)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture
def own_cache(hermetic):
    """An empty user cache of this test's own (reference records, the empty MLflow store), instead of the
    run's shared one."""
    cache = Path(os.environ["HOME"]) / ".cache" / "autogk"
    for name in SHARED_CACHES:
        (cache / name).unlink()
        (cache / name).mkdir()
    return cache


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


# Triton's interpreter set up once a launch, as the judge's kernel processes run it on the CPU
# (autogk_git/bench/judge/interp.py): 13-39 % of the bundled kernels' interpreter time otherwise.
INTERP_PRELUDE = (f"import sys; sys.path.insert(0, {str(REPO)!r}); "
                  "from autogk_git.bench.judge.interp import patch_once; patch_once()\n")


def interpreted(script: str, *args, timeout: float = 900, once: bool = True) -> subprocess.CompletedProcess:
    """`script` run in a process of its own by Triton's CPU interpreter (no GPU), its arguments as strings;
    once=False: Triton's interpreter as it comes."""
    env = {**os.environ, "TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": ""}
    return subprocess.run([sys.executable, "-c", (INTERP_PRELUDE if once else "") + script, *map(str, args)],
                          capture_output=True, text=True, env=env, timeout=timeout)


def kept_attempts(bundle: Path, target: str, where: Path) -> dict[str, str]:
    """The flagship attempts a project bundle kept: {attempt stem: its kernel file at the keep}, read from each
    `autogk: keep ... #NNNN: [stem] ...` commit (benchmarks/flagship/attempt.py names the hypothesis so)."""
    repo = where / "kept.git"
    git(where, "clone", "-q", "--mirror", str(bundle), str(repo))
    kept = {}
    for line in git(repo, "log", "--all", "--format=%H %s").splitlines():
        sha, _, subject = line.partition(" ")
        head, sep, rest = subject.partition(": [")
        if subject.startswith("autogk: keep ") and sep and "]" in rest:
            kept[rest.split("]", 1)[0]] = git(repo, "show", f"{sha}:kernels/{target}/kernel.py")
    return kept


def autogk(cwd: Path, *args: str, check: bool = True, env: dict | None = None, timeout: float = 600):
    """Run the real CLI in a subprocess, as a user would."""
    proc = subprocess.run([str(BIN / "autogk"), *args], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"autogk {' '.join(args)} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


def autogk_in(cwd: Path, *args: str, check: bool = True, env: dict | None = None):
    """Run a command in-process with click's CliRunner: the CLI's own code and exit codes, without
    starting an interpreter (about a second each on this machine). Use `autogk` where the process is
    the point (hooks, signals, the installed entry point)."""
    import subprocess as sp

    import click
    from click.testing import CliRunner

    from autogk_git.cli import cli
    from autogk_git.errors import AutogkError

    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    os.environ.update(env or {})
    os.chdir(cwd)
    try:
        res = CliRunner().invoke(cli, list(args), standalone_mode=False, catch_exceptions=True)
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)  # commands may set variables (iterate --backend does)
    out, err, rc = res.stdout, res.stderr, res.return_value if isinstance(res.return_value, int) else 0
    exc = res.exception
    if isinstance(exc, AutogkError):  # what cli.main prints for a known failure
        err += f"error: {exc.message}\n" + (f"hint: {exc.hint}\n" if exc.hint else "")
        rc = 1
    elif isinstance(exc, click.ClickException):
        err += f"Error: {exc.format_message()}\n"
        rc = exc.exit_code
    elif isinstance(exc, SystemExit):
        rc = exc.code if isinstance(exc.code, int) else 1
    elif exc is not None:
        raise exc
    proc = sp.CompletedProcess(["autogk", *args], rc, out, err)
    if check and rc != 0:
        raise AssertionError(f"autogk {' '.join(args)} exited {rc}\n{out}\n{err}")
    return proc


def built_once(tmp_path_factory, name: str, build: Callable[[Path], None]) -> Path:
    """The folder `name`, made by build(folder) once per test run and shared by every xdist worker.

    A session fixture alone runs once per worker (up to four times): the expensive templates (an
    initialized project, an iterated one) are built by whichever worker asks first, under a file
    lock, and only read by the others (each test copies them). Built where it stays (an MLflow store
    records absolute paths); a marker written last tells a finished build from one that failed."""
    shared = run_folder(tmp_path_factory) / "built-once"
    shared.mkdir(exist_ok=True)
    folder, marker = shared / name, shared / f"{name}.built"
    with open(shared / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not marker.exists():
            shutil.rmtree(folder, ignore_errors=True)  # a build that failed in another worker
            folder.mkdir()
            build(folder)
            marker.write_text("")
    return folder


@pytest.fixture(scope="session")
def template_project(tmp_path_factory):
    """A project with the small `scale` test target, built once per run and copied per test."""
    return built_once(tmp_path_factory, "template", _build_template) / "proj"


def _build_template(folder: Path) -> None:
    root = folder / "proj"
    env = {"GIT_CONFIG_NOSYSTEM": "1", "HOME": str(root.parent),
           "GIT_AUTHOR_NAME": "T", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "T", "GIT_COMMITTER_EMAIL": "t@example.com"}
    subprocess.run([str(BIN / "autogk"), "init", str(root), "--definition", str(DATA / "scale" / "definition.json"),
                    "--workloads", str(DATA / "scale" / "workloads.jsonl"), "--no-check"],
                   check=True, capture_output=True, env={**os.environ, **env})
    shutil.copyfile(DATA / "scale" / "kernel.py", root / "kernels" / "scale" / "kernel.py")
    subprocess.run(["git", "commit", "-qam", "scale: triton kernel"], cwd=root, check=True, env={**os.environ, **env})
    # The loop's mechanics (keep, merge, archive, resume) are tested on CPU, where nothing is timed: these
    # tests merge correct candidates; tests of the default (hold them untimed) set `untimed = "hold"`.
    # The extra correctness calls (fresh sets, repeat, stress sets, unlisted shape) run on each job's
    # smallest workload only: the checks are the subject of tests/bench/judge/ and
    # tests/bench/backends/test_interpret.py, not of the loop's tests (0.6 s of an experiment's ~2 here).
    cfg = (root / ".autogk.toml").read_text()
    (root / ".autogk.toml").write_text(cfg.replace(
        "[bench]\n", '[bench]\nuntimed = "merge"\ncpu_extra_checks_max_numel = 1\n', 1))
    subprocess.run(["git", "commit", "-qam", "tests: merge correct untimed candidates"], cwd=root, check=True,
                   env={**os.environ, **env})
    # What each copy's first loop would otherwise redo (3-7 s of CPU in every test that runs the loop): the
    # reference's check (a torch process; its mark is keyed by definition and workloads, so a test that
    # changes them is checked again) and an empty MLflow store (MLflow's table migrations). Tests of the
    # store's creation remove it (without_store). A fresh checkout makes both itself in test_readme.
    subprocess.run([sys.executable, "-c", _PREPARE, str(root)], check=True, capture_output=True,
                   env={**os.environ, **env})


_PREPARE = """
import sys
from autogk_git.loop.check import check_reference, trunk_target
from autogk_git.project import Project
from autogk_git.tracking import mlflow_store
from pathlib import Path
p = Project.find(Path(sys.argv[1]))
check_reference(p, trunk_target(p, p.target(None)), cache=True)
mlflow_store._client(p)
"""


def _move_store(root: Path) -> None:
    """A copied store's default experiment still names the template's artifact folder: point it here."""
    import sqlite3
    db = root / "mlruns" / "mlflow.db"
    if db.exists():
        with sqlite3.connect(db) as con:
            con.execute("update experiments set artifact_location = ? where experiment_id = 0",
                        (str(root / "mlruns" / "artifacts" / "0"),))
        con.close()


def without_store(root: Path) -> None:
    """For tests of a store's creation: the project as `autogk init` leaves it, with no MLflow store."""
    shutil.rmtree(root / "mlruns")


@pytest.fixture(scope="session")
def small_template_project(template_project, tmp_path_factory):
    """template_project with two of its workloads (n=50 and n=1000), both in the quick stage: one judge job
    per experiment, and no full stage after the quick gate. For tests whose subject is not the workloads."""
    return built_once(tmp_path_factory, "template-small", lambda f: _build_small(template_project, f)) / "proj"


SMALL_WORKLOADS = ('"n": 50}', '"n": 1000}')


def _build_small(template: Path, folder: Path) -> None:
    root = folder / "proj"
    shutil.copytree(template, root, symlinks=True)
    _move_store(root)
    env = {"GIT_CONFIG_NOSYSTEM": "1", "HOME": str(folder),
           "GIT_AUTHOR_NAME": "T", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "T", "GIT_COMMITTER_EMAIL": "t@example.com"}
    lines = (DATA / "scale" / "workloads.jsonl").read_text().splitlines()
    (root / "kernels" / "scale" / "workloads.jsonl").write_text(
        "\n".join(ln for ln in lines if any(w in ln for w in SMALL_WORKLOADS)) + "\n")
    subprocess.run(["git", "commit", "-qam", "tests: two workloads"], cwd=root, check=True, env={**os.environ, **env})
    subprocess.run([sys.executable, "-c", _PREPARE, str(root)], check=True, capture_output=True,
                   env={**os.environ, **env})


@pytest.fixture
def project(template_project, tmp_path):
    return _copy(template_project, tmp_path / "proj")


@pytest.fixture
def small_project(small_template_project, tmp_path):
    """A copy of small_template_project; a module whose tests do not concern the workloads takes it as its
    `project` (`def project(small_project): return small_project`)."""
    return _copy(small_template_project, tmp_path / "proj")


def _copy(template: Path, dst: Path) -> Path:
    shutil.copytree(template, dst, symlinks=True)
    _move_store(dst)
    # Hooks point at this interpreter already; refresh them in case the copy moved anything (in-process:
    # the same function `autogk hooks install` calls, without starting an interpreter per test).
    from autogk_git.git import hooks
    from autogk_git.record import refs
    hooks.install(dst, refs.NOTES_GLOB)
    return dst


def notes_json(root: Path, sha: str, ref: str = "autogk/results") -> dict:
    """The result measured on sha itself (a note may also carry a copied, stale one)."""
    from autogk_git.record.notes import parse_result
    res = parse_result(git(root, "notes", "--ref", ref, "show", sha), sha)
    assert res is not None, f"no result for {sha} in its note"
    return res


@pytest.hookimpl(wrapper=True, optionalhook=True)  # optional: `pytest -p no:xdist` works too
def pytest_xdist_auto_num_workers(config):
    """`-n auto` (pyproject's addopts): one worker more than xdist's own count of the cores, at most 4
    (`--maxprocesses`); PYTEST_XDIST_AUTO_NUM_WORKERS, when set, is taken as it is.

    The suite is CPU-bound but not wholly: its SLURM tests wait on the cluster's one-minute clock, the
    limit tests on their limits, the hooks on git. On the 2-core machine 3 workers took 551 s where 2
    took 620-632 s on one clone of one commit, and 3 passed every test beside a CPU hog
    (benchmarks/RESULTS.md)."""
    count = yield
    return count if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS") else count + 1


def _slow_seconds(item) -> float:
    """`@pytest.mark.slow(S)`: S, the test's wall seconds in an xdist run of the whole suite (30 unsaid)."""
    args = item.get_closest_marker("slow").args
    return float(args[0]) if args else 30.0


# Tests that take a lock one at a time across the workers (tests/test_slurm.py: the one cluster): run apart,
# a worker that reached one while another held the lock sat idle beside it. They run as one unit, in one
# slice, one after the other; a test of the unit not marked `slow` counts this many seconds.
LOCKED_FIXTURE = "one_slurm_test_at_a_time"
LOCKED_TEST_S = 5.0


def _locked(item) -> bool:
    return LOCKED_FIXTURE in getattr(item, "fixturenames", ())


def pytest_collection_modifyitems(config, items):
    """Tests marked `slow` start first, so none is left running alone at the end.

    The suite runs with `--dist worksteal`: worker j gets the j-th of k equal, contiguous slices of
    this order and idle workers steal from the tails of the others, never a test a worker has started.
    The slow tests lead the slices, longest first, each onto the slice whose slow tests sum the least
    seconds so far (`slow(S)`): the slices' heads come out even, and no worker is left with two long
    tests while another ends early. The tests that take one lock in turn (LOCKED_FIXTURE) lead one slice
    together, its slow ones first, as one unit of their summed seconds: at the head of a slice, where no
    other worker steals them while one of them runs. Without xdist (k = 1) the units simply run first,
    longest first."""
    k = int(getattr(config, "workerinput", {}).get("workercount", 1))
    locked = [it for it in items if _locked(it)]
    locked.sort(key=lambda it: -_slow_seconds(it) if it.get_closest_marker("slow") else 0.0)
    units = [[it] for it in items if it.get_closest_marker("slow") and not _locked(it)]
    if locked:
        units.append(locked)

    def seconds(unit) -> float:
        return sum(_slow_seconds(it) if it.get_closest_marker("slow") else LOCKED_TEST_S for it in unit)
    if not units:
        return
    units.sort(key=lambda u: -seconds(u))
    placed = {id(it) for u in units for it in u}
    rest = [it for it in items if id(it) not in placed]
    lead: list[list] = [[] for _ in range(k)]
    load = [0.0] * k
    for unit in units:
        j = min(range(k), key=lambda j: (load[j], j))
        lead[j].extend(unit)
        load[j] += seconds(unit)
    # Slice sizes exactly as worksteal cuts them: len(pending) // workers_remaining, in worker order.
    ordered, left, fill = [], len(items), iter(rest)
    for j in range(k):
        size = left // (k - j)
        left -= size
        part = lead[j][:]
        while len(part) < size:
            nxt = next(fill, None)
            if nxt is None:
                break
            part.append(nxt)
        ordered.extend(part)
    ordered.extend(fill)  # anything not placed (more slow tests than a slice holds)
    assert sorted(map(id, ordered)) == sorted(map(id, items))
    items[:] = ordered
