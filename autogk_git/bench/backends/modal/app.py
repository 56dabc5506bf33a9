"""The Modal app: a pinned image and one GPU function that runs the bench worker on a job.

The only module that imports `modal`, and only inside functions: importing this module costs
nothing, and the function body (`run_job`) needs only the standard library and the bench runner,
so the same code runs here (`.local()`, tests) and inside the container.

    app   [modal] app, ephemeral (`app.run()`), entered once per process and shared by threads
    image debian_slim(python) + pip torch==, triton==, safetensors== (all pinned from [modal])
          + the autogk_git package itself (the worker and runner travel with the function)
    fn    gpu=[modal] gpu, timeout=[modal] timeout_s, retries=[modal] retries; serialized so that
          one process can build apps for several configs
"""
from __future__ import annotations

import atexit
import base64
import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from autogk_git.env import in_modal_container  # by name: run_job's argument `env` is the job's environment
from autogk_git.errors import BenchError

PACKAGE_DIR = Path(__file__).resolve().parents[3]  # autogk_git/
REMOTE_BLOBS = "/autogk/blobs"      # where blobs land inside the container
VOLUME_MOUNT = "/autogk/volume"     # where the blob Volume is mounted
MARGIN_S = 30                       # the worker's limit stays this far inside Modal's


def image_spec(cfg) -> dict[str, Any]:
    """What the image and function are made of: every pin and setting, from [modal]."""
    m = cfg.modal
    return {
        "app": m.app,
        "gpu": m.gpu,
        "python": m.python,
        "pip": [f"torch=={m.torch}", f"triton=={m.triton}", f"safetensors=={m.safetensors}"],
        "timeout_s": int(m.timeout_s),
        "retries": int(m.retries),
        "volume": m.volume,
        "sources": {"autogk_git": str(PACKAGE_DIR)},
    }


# ------------------------------------------------------------------------------------------------
# The function body: runs in the container (and in-process under `.local()`)
# ------------------------------------------------------------------------------------------------

def run_job(job: dict[str, Any], timeout_s: float, blobs: dict[str, str] | None = None,
            env: dict[str, str] | None = None, blob_dir: str | None = None) -> dict[str, Any]:
    """Run the bench worker on `job` exactly as runner.run_worker does locally; returns its result.

    blobs: relative path -> base64 bytes (small safetensors files travel in the call);
    blob_dir: a folder already holding them (the mounted Volume, for large ones).
    Infrastructure failures come back as {"error": ..., "hint": ...}: an exception raised here
    would reach the caller as an opaque remote traceback.
    """
    from autogk_git.bench import runner

    job = dict(job)
    try:
        if blobs:
            root = Path(tempfile.mkdtemp(prefix="autogk-blobs-"))
            for rel, data in blobs.items():
                p = root / rel
                p.parent.mkdir(parents=True, exist_ok=True)
                p.write_bytes(base64.b64decode(data))
            job["blob_root"] = str(root)
        elif blob_dir:
            job["blob_root"] = blob_dir
        run_env = dict(os.environ, **(env or {}))
        out = runner.run_worker(job, run_env, timeout_s)
    except BenchError as e:
        return {"error": e.message, "hint": e.hint or ""}
    out.setdefault("environment", {})["runner"] = "modal" if in_modal_container() else "local"
    return out


def autogk_bench(job: dict, timeout_s: float, blobs: dict | None = None, env: dict | None = None,
                 blob_dir: str | None = None) -> dict:
    """The Modal function. Module-level, so it is pickled by reference: no bytecode crosses Python versions."""
    return run_job(job, timeout_s, blobs, env, blob_dir)


# ------------------------------------------------------------------------------------------------
# App, image, function (built offline)
# ------------------------------------------------------------------------------------------------

_BUILT: dict[str, tuple[Any, Any, Any]] = {}
_BUILD_LOCK = threading.Lock()


def build(cfg) -> tuple[Any, Any, Any]:
    """(app, image, function) for this config; no network. Cached per spec."""
    import json

    import modal

    spec = image_spec(cfg)
    key = json.dumps(spec, sort_keys=True)
    with _BUILD_LOCK:
        if key in _BUILT:
            return _BUILT[key]
        image = (modal.Image.debian_slim(python_version=spec["python"])
                 .pip_install(*spec["pip"])
                 .env({"AUTOGK_IN_MODAL": "1", "PYTHONDONTWRITEBYTECODE": "1"})
                 .add_local_python_source("autogk_git"))  # .py files only: the worker and runner travel
        app = modal.App(spec["app"])
        volumes = {}
        if spec["volume"]:
            volumes[VOLUME_MOUNT] = modal.Volume.from_name(spec["volume"], create_if_missing=True)
        retries = modal.Retries(max_retries=spec["retries"], initial_delay=2.0, backoff_coefficient=2.0) \
            if spec["retries"] else None

        fn = app.function(gpu=spec["gpu"], image=image, timeout=spec["timeout_s"], retries=retries,
                          volumes=volumes, serialized=True, name="autogk_bench")(autogk_bench)
        _BUILT[key] = (app, image, fn)
        return _BUILT[key]


def image_commands(image) -> list[str]:
    """The image's build steps, base first, read offline (for tests and `doctor`)."""
    import inspect

    from modal._utils.async_utils import synchronizer

    def walk(obj) -> list[str]:
        cv = inspect.getclosurevars(obj._load).nonlocals
        bases = list((cv.get("base_images") or {}).values())
        if cv.get("base_image") is not None:
            bases.append(cv["base_image"])
        out: list[str] = []
        for b in bases:
            out += walk(b)
        if cv.get("dockerfile_function"):
            out += [c for c in cv["dockerfile_function"]("2025.06").commands if c != "FROM base"]
        if cv.get("mount") is not None:
            out.append(f"MOUNT {cv['mount']!r}")
        return out

    return walk(synchronizer._translate_in(image))


# ------------------------------------------------------------------------------------------------
# Calling it
# ------------------------------------------------------------------------------------------------

_RUNNING: dict[int, Any] = {}
_RUN_LOCK = threading.Lock()


def _in_thread(fn, timeout_s: float, what: str, hint: str):
    """fn() with a deadline: Modal's client retries an unanswered call for about a minute."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller's thread
            box["error"] = e

    t = threading.Thread(target=target, daemon=True, name=f"autogk-modal-{what}")
    t.start()
    t.join(timeout_s)
    if t.is_alive():
        raise BenchError(f"Modal did not answer within {timeout_s:.0f} s while {what}", hint)
    if "error" in box:
        raise box["error"]
    return box.get("value")


def connect(cfg) -> None:
    """Check the token with Modal's API, failing within [modal] connect_timeout_s."""
    import modal

    def hello() -> None:
        client = modal.Client.from_env()
        client.hello()

    try:
        _in_thread(hello, cfg.modal.connect_timeout_s, "checking the token",
                   "check the network and the token (`modal token new`), or raise [modal] connect_timeout_s")
    except modal.exception.AuthError as e:
        raise BenchError(f"Modal rejected the credentials: {e}",
                         "run `modal token new` (or set MODAL_TOKEN_ID and MODAL_TOKEN_SECRET), "
                         "then `autogk doctor`") from None
    except modal.exception.ConnectionError as e:
        raise BenchError(f"could not reach Modal: {e}", "check the network, then `autogk doctor`") from None


def upload_blobs(cfg, files: dict[str, Path], key: str) -> str:
    """Put files on the [modal] volume under /<key>/; returns that folder as the container sees it."""
    import modal

    vol = modal.Volume.from_name(cfg.modal.volume, create_if_missing=True)
    with vol.batch_upload(force=True) as batch:
        for rel, p in files.items():
            batch.put_file(str(p), f"/{key}/{rel}")
    return f"{VOLUME_MOUNT}/{key}"


def _ensure_running(cfg, app) -> None:
    """Enter the ephemeral app once per process; threads share it; left at exit."""
    with _RUN_LOCK:
        if id(app) in _RUNNING:
            return
        ctx = app.run()
        ctx.__enter__()
        _RUNNING[id(app)] = ctx
        atexit.register(lambda: ctx.__exit__(None, None, None))


def call(cfg, job: dict[str, Any], timeout_s: float, blobs: dict[str, str] | None = None,
         blob_dir: str | None = None, say=lambda s: None) -> dict[str, Any]:
    """Run a job on Modal; returns runner.run_worker's result. Failures become BenchError."""
    import modal
    from modal import exception as mx

    app, _, fn = build(cfg)
    inner = max(1.0, min(float(timeout_s), cfg.modal.timeout_s - MARGIN_S))
    attempts = cfg.modal.retries + 1
    last: BaseException | None = None
    for attempt in range(1, attempts + 1):
        try:
            _ensure_running(cfg, app)
            out = fn.remote(job, inner, blobs, None, blob_dir)
        except mx.AuthError as e:
            raise BenchError(f"Modal rejected the credentials: {e}", "run `modal token new`, then `autogk doctor`") \
                from None
        except (mx.ResourceExhaustedError,) as e:
            raise BenchError(f"Modal refused the job (quota or capacity for gpu={cfg.modal.gpu}): {e}",
                             "wait, pick another [modal] gpu, or check your Modal plan's limits") from None
        except mx.FunctionTimeoutError:
            raise BenchError(f"Modal stopped the benchmark after [modal] timeout_s = {cfg.modal.timeout_s} s",
                             "raise [modal] timeout_s (image pulls and first compiles count too)") from None
        except mx.ImageBuildError as e:
            raise BenchError(f"Modal could not build the image ({', '.join(image_spec(cfg)['pip'])}): {e}",
                             "check the [modal] python/torch/triton pins fit together") from None
        except (mx.ConnectionError, mx.InternalFailure, mx.InternalError, mx.ServiceError, OSError) as e:
            last = e  # preemption, a dropped connection: retry by policy
            say(f"modal: attempt {attempt}/{attempts} failed ({type(e).__name__}: {str(e)[:200]})")
            time.sleep(min(30.0, 2.0 * attempt))
            continue
        if "error" in out:
            raise BenchError(f"bench worker on Modal: {out['error']}", out.get("hint") or "run `autogk doctor`")
        return out
    raise BenchError(f"Modal failed {attempts} time(s); last error {type(last).__name__}: {last}",
                     "retry later, or raise [modal] retries")
