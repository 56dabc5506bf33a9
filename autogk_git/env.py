"""Every environment variable autogk reads, each with one named, documented getter.

Call the getter, never `os.environ.get("NAME")` elsewhere in the package (tests/test_env_registry.py scans
for it). Each getter reads at call time (tests and the loop set variables after import) and takes an
optional mapping, for code that reasons about an environment other than this process's own (a child's,
a test's). Handing a whole environment to a child process (`dict(os.environ)`) is not a read.

Secrets (ANTHROPIC_API_KEY, MODAL_TOKEN_*): this module never logs or prints anything; the getter of a
secret returns it only to the one caller that needs it, and the others ask whether it is set
(`has_anthropic_api_key`, `modal_token_in_environment`). Neither a key nor a token is ever written to
notes, MLflow or logs; the judge scrubs them from a kernel's environment (bench/judge/hygiene.py).

Config overrides, `AUTOGK_<SECTION>_<KEY>` (e.g. AUTOGK_BENCH_BACKEND=modal), are table-driven: every key
of config.SCHEMA has one, named by `config_override_name`, and config.parse reads them all from the
environment it is given. They are documented by that table (`autogk init` writes the commented defaults),
not one getter each.

Read elsewhere, so not here:
    bench/judge/   runs on the GPU machine and imports nothing of the package outside itself, so it reads
                   its own: AUTOGK_SANDBOX (0: no Landlock domain for the kernel's process),
                   AUTOGK_PROFILE_DIR (write a profile there), TRITON_INTERPRET, HOME, TMPDIR,
                   TRITON_CACHE_DIR, CUDA_CACHE_PATH, PYTHONPYCACHEPREFIX (folders a kernel may write),
                   AUTOGK_JOB_TAG (set by the judge to find its own processes).
    examples/      bundled kernels read TRITON_INTERPRET themselves: they run inside a user's project.

Set for others, not read by the package:
    AUTOGK_PROMPT_FILE, AUTOGK_HYPOTHESIS_FILE, AUTOGK_WORKTREE, AUTOGK_TARGET_DIR, AUTOGK_EDITABLE,
    AUTOGK_EXPERIMENT    for the command agent's program (agents/command.py)
    AUTOGK_IN_MODAL      in the Modal image
    MLFLOW_LOGGING_LEVEL, MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR   MLflow's own (cli.py, tracking/)
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Callable, Mapping, TypeVar

Environ = Mapping[str, str]
F = TypeVar("F", bound=Callable)

GETTERS: dict[str, Callable] = {}
"""Variable name -> its getter: the registry doctor and tests read."""

# Names other modules need as names: to set them for a child, or to print them in a hint.
ANTHROPIC_API_KEY = "ANTHROPIC_API_KEY"
LOOP = "AUTOGK_LOOP"
BENCH_GPU = "AUTOGK_BENCH_GPU"
GPU_LOCK_DIR = "AUTOGK_GPU_LOCK_DIR"
TRITON_INTERPRET = "TRITON_INTERPRET"
CUDA_VISIBLE_DEVICES = "CUDA_VISIBLE_DEVICES"
MLFLOW_BIND = ("MLFLOW_GUNICORN_OPTS", "MLFLOW_UVICORN_OPTS", "MLFLOW_WAITRESS_OPTS", "MLFLOW_HOST", "MLFLOW_PORT",
               "GUNICORN_CMD_ARGS", "UVICORN_HOST", "UVICORN_PORT")
"""Through these MLflow (or the server under it) takes a bind address of its own; `autogk ui` chooses it."""


def _reads(*names: str) -> Callable[[F], F]:
    def register(fn: F) -> F:
        for name in names:
            assert name not in GETTERS, f"{name} has two getters"
            GETTERS[name] = fn
        return fn
    return register


def _raw(name: str, environ: Environ | None) -> str | None:
    return (os.environ if environ is None else environ).get(name)


# ------------------------------------------------------------------------------------------------
# Agents
# ------------------------------------------------------------------------------------------------

@_reads(ANTHROPIC_API_KEY)
def anthropic_api_key(environ: Environ | None = None) -> str | None:
    """ANTHROPIC_API_KEY: the anthropic agent's API key (secret; never in .autogk.toml). None when unset or empty."""
    return _raw(ANTHROPIC_API_KEY, environ) or None


def has_anthropic_api_key(environ: Environ | None = None) -> bool:
    """Whether ANTHROPIC_API_KEY is set (non-empty): `--agent auto` then means anthropic. Never the value."""
    return anthropic_api_key(environ) is not None


@_reads("ANTHROPIC_BASE_URL")
def anthropic_base_url(environ: Environ | None = None) -> str | None:
    """ANTHROPIC_BASE_URL: another Messages API endpoint (a proxy, a test server); None: the SDK's default."""
    return _raw("ANTHROPIC_BASE_URL", environ) or None


# ------------------------------------------------------------------------------------------------
# CLI and hooks
# ------------------------------------------------------------------------------------------------

@_reads("AUTOGK_VERBOSE")
def verbosity(environ: Environ | None = None) -> int:
    """AUTOGK_VERBOSE: like -v (1, true, yes, on) or -vv (2): show MLflow's own log lines. Default 0."""
    raw = (_raw("AUTOGK_VERBOSE", environ) or "").strip().lower()
    return 1 if raw in ("true", "yes", "on") else int(raw) if raw.isdigit() else 0


@_reads(LOOP)
def in_loop(environ: Environ | None = None) -> bool:
    """AUTOGK_LOOP: set (non-empty) on the loop's own git commands, so the hooks leave its commits to it."""
    return bool(_raw(LOOP, environ))


@_reads("AUTOGK_HOOK_FOREGROUND")
def hook_foreground(environ: Environ | None = None) -> bool:
    """AUTOGK_HOOK_FOREGROUND: set (non-empty): the post-commit hook benchmarks in the foreground, whatever
    [bench] hook_mode says."""
    return bool(_raw("AUTOGK_HOOK_FOREGROUND", environ))


# ------------------------------------------------------------------------------------------------
# Bench backends
# ------------------------------------------------------------------------------------------------

@_reads(GPU_LOCK_DIR)
def gpu_lock_dir(environ: Environ | None = None) -> Path:
    """AUTOGK_GPU_LOCK_DIR: where the local backend's per-GPU lock files live; default <tmp>/autogk-gpu-locks,
    one per machine, so that every project on it shares the GPUs fairly."""
    return Path(_raw(GPU_LOCK_DIR, environ) or Path(tempfile.gettempdir()) / "autogk-gpu-locks")


@_reads(CUDA_VISIBLE_DEVICES)
def cuda_visible_devices(environ: Environ | None = None) -> list[str] | None:
    """CUDA_VISIBLE_DEVICES: the CUDA devices this process may see, as listed; None when unset (all of them)."""
    raw = _raw(CUDA_VISIBLE_DEVICES, environ)
    return None if raw is None else [g.strip() for g in raw.split(",") if g.strip()]


@_reads("HOME")
def home(environ: Environ | None = None) -> Path:
    """HOME: the user's home folder (where ~/.modal.toml is looked for); default the password database's."""
    return Path(_raw("HOME", environ) or str(Path.home()))


def user_cache(environ: Environ | None = None) -> Path:
    """~/.cache/autogk: what autogk keeps for every project of a user (the reference's records, the empty
    MLflow store), content-addressed or keyed by version."""
    return home(environ) / ".cache" / "autogk"


@_reads("MODAL_TOKEN_ID", "MODAL_TOKEN_SECRET")
def modal_token_in_environment(environ: Environ | None = None) -> bool:
    """MODAL_TOKEN_ID and MODAL_TOKEN_SECRET: Modal's credentials (secret), both needed; says only whether
    both are set. Modal's client reads the values itself."""
    return bool(_raw("MODAL_TOKEN_ID", environ) and _raw("MODAL_TOKEN_SECRET", environ))


@_reads("MODAL_CONFIG_PATH")
def modal_config_path(environ: Environ | None = None) -> Path:
    """MODAL_CONFIG_PATH: Modal's config file (tokens per profile); default ~/.modal.toml."""
    return Path(_raw("MODAL_CONFIG_PATH", environ) or home(environ) / ".modal.toml")


@_reads("MODAL_PROFILE")
def modal_profile(environ: Environ | None = None) -> str | None:
    """MODAL_PROFILE: which profile of Modal's config file to use; None: the active one."""
    return _raw("MODAL_PROFILE", environ) or None


@_reads("MODAL_SERVER_URL")
def modal_server_url(environ: Environ | None = None) -> str | None:
    """MODAL_SERVER_URL: Modal's API address; None: the profile's, else https://api.modal.com."""
    return _raw("MODAL_SERVER_URL", environ) or None


@_reads("MODAL_TASK_ID")
def in_modal_container(environ: Environ | None = None) -> bool:
    """MODAL_TASK_ID: set by Modal inside its containers; tells a result made there from a `.local()` run."""
    return bool(_raw("MODAL_TASK_ID", environ))


@_reads("GIT_CONFIG_GLOBAL", "XDG_CONFIG_HOME")
def git_global_config_files(environ: Environ | None = None) -> list[str | None]:
    """GIT_CONFIG_GLOBAL, XDG_CONFIG_HOME: where git reads its per-user config from (GIT_CONFIG_GLOBAL's
    file, ~/.gitconfig, $XDG_CONFIG_HOME/git/config); some may be None or not exist."""
    home = Path(os.path.expanduser("~"))
    xdg = Path(_raw("XDG_CONFIG_HOME", environ) or home / ".config")
    return [_raw("GIT_CONFIG_GLOBAL", environ), str(home / ".gitconfig"), str(xdg / "git" / "config")]


@_reads("GIT_CONFIG_SYSTEM")
def git_system_config_files(environ: Environ | None = None) -> list[str | None]:
    """GIT_CONFIG_SYSTEM: where git reads its system config from (else /etc/gitconfig)."""
    return [_raw("GIT_CONFIG_SYSTEM", environ), "/etc/gitconfig"]


@_reads("MLFLOW_LOGGING_LEVEL")
def mlflow_logging_level(environ: Environ | None = None) -> str:
    """MLFLOW_LOGGING_LEVEL: MLflow's own log level; at DEBUG or INFO its tracebacks are shown in full."""
    return (_raw("MLFLOW_LOGGING_LEVEL", environ) or "WARNING").upper()


# ------------------------------------------------------------------------------------------------
# The commands
# ------------------------------------------------------------------------------------------------

@_reads(*MLFLOW_BIND)
def mlflow_bind_set(environ: Environ | None = None) -> list[str]:
    """MLFLOW_GUNICORN_OPTS, MLFLOW_UVICORN_OPTS, MLFLOW_WAITRESS_OPTS, MLFLOW_HOST, MLFLOW_PORT,
    GUNICORN_CMD_ARGS, UVICORN_HOST, UVICORN_PORT: those that are set, which `autogk ui` drops from the
    server's environment (each could move its address behind the command's back)."""
    return [v for v in MLFLOW_BIND if _raw(v, environ)]


def config_override_name(section: str, key: str) -> str:
    """AUTOGK_<SECTION>_<KEY>: the variable that overrides [section] key of .autogk.toml (see config.SCHEMA)."""
    return f"AUTOGK_{section.upper()}_{key.upper()}"


# AUTOGK_ variables read or set outside this module's getters (see the docstring): not typos.
NOT_READ_HERE = ("AUTOGK_SANDBOX", "AUTOGK_PROFILE_DIR", "AUTOGK_JOB_TAG", "AUTOGK_PROMPT_FILE",
                 "AUTOGK_HYPOTHESIS_FILE", "AUTOGK_WORKTREE", "AUTOGK_TARGET_DIR", "AUTOGK_EDITABLE",
                 "AUTOGK_EXPERIMENT", "AUTOGK_IN_MODAL", "AUTOGK_SETUP_PIP")


def unknown_autogk_names(config_names: list[str], environ: Environ | None = None) -> list[tuple[str, str | None]]:
    """(name, the known name it is closest to, or None) for each AUTOGK_* variable set that nothing reads:
    a mistyped override is otherwise ignored without a word. config_names: every config override's name."""
    import difflib
    known = {*GETTERS, *NOT_READ_HERE, *config_names}
    env = os.environ if environ is None else environ
    out = []
    for name in sorted(n for n in env if n.startswith("AUTOGK_") and n not in known):
        close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.75)
        out.append((name, close[0] if close else None))
    return out
