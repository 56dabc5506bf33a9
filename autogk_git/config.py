"""`.autogk.toml`: embedded defaults, validation on load, `AUTOGK_<SECTION>_<KEY>` overrides.

Every key is declared once in SCHEMA with its type, default and a one-line doc; an unknown key or a
bad value is a ConfigError naming the key and the fix. Secrets never live here: API keys and Modal
tokens come from the environment only (see env.py).
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from autogk_git.env import config_override_name
from autogk_git.errors import ConfigError
from autogk_git.files import MAX_CONFIG_BYTES, read_bytes

try:  # Python 3.11+
    import tomllib
except ModuleNotFoundError:  # pragma: no cover
    import tomli as tomllib  # type: ignore[no-redef]

CONFIG_NAME = ".autogk.toml"


@dataclass(frozen=True)
class Key:
    type: type | tuple[type, ...]
    default: Any
    doc: str
    choices: tuple[Any, ...] | None = None
    check: Callable[[Any], bool] | None = None
    rule: str = ""


def _pos(x: Any) -> bool:
    return x > 0


def _frac(x: Any) -> bool:
    return 0 <= x < 1


def _inside(glob: str) -> bool:
    return bool(glob.strip()) and not glob.startswith(("/", "~")) and ".." not in glob.replace("\\", "/").split("/")


def _splits(command: str) -> bool:
    import shlex
    try:
        shlex.split(command)
        return True
    except ValueError:  # "No closing quotation", "No escaped character"
        return False


def _price_table_ok(table: Any) -> bool:
    return all(isinstance(k, str) and isinstance(v, list) and len(v) in (2, 4)
               and all(isinstance(p, (int, float)) and not isinstance(p, bool) and p >= 0 for p in v)
               for k, v in table.items())


SCHEMA: dict[str, dict[str, Key]] = {
    "project": {
        "trunk": Key(str, "main", "branch holding the best kept kernel"),
        "target": Key(str, "", "default target (a folder under [project] targets); empty: the only one"),
        "targets": Key(str, "kernels", "folder holding the targets, relative to the repository root",
                       check=lambda x: bool(x) and not x.startswith("/") and ".." not in x.split("/"),
                       rule="a relative path inside the repository"),
    },
    "bench": {
        "backend": Key(str, "auto", "where benchmarks run", ("auto", "interpret", "local", "modal", "slurm")),
        "gpu": Key(str, "", "local: CUDA device indices to use, e.g. '0,1'; empty: all"),
        "stride": Key(int, 4, "stride stage: time every k-th workload", check=_pos, rule="> 0"),
        "trials": Key(int, 3, "fresh input sets per correctness check", check=_pos, rule="> 0"),
        "reps": Key(int, 30, "timed calls per workload per round", check=_pos, rule="> 0"),
        "warmup": Key(int, 5, "untimed calls before timing", check=lambda x: x >= 0, rule=">= 0"),
        "timing_mem_mb": Key(int, 1024, "MB of inputs and outputs one round's timed calls of one workload may hold "
                             "(each call gets its own input set): a workload whose call holds more than "
                             "1/reps of it gets fewer calls a round, so noisier rounds; cut further, never below 2, where a "
                             "round's sets of every workload would not fit 80% of the GPU's free memory",
                             check=_pos, rule="> 0"),
        "clock_null_window": Key(bool, False, "the judge's clock also times each label's null window (the same "
                                 "window, no call in it) and records the pair's figure less each process's fixed "
                                 "cost per window (witness_null_us): a measurement, never a verdict's figure yet"),
        "timed_stress": Key(bool, True, "one timed call a window (drawn at random) gets a stress set's values (rows "
                            "scaled over orders of magnitude, outliers, shifted rows) and is compared with the "
                            "reference: a kernel fitted to N(0,1) in its timed calls alone is caught there"),
        "min_rounds": Key(int, 5, "ab stage: rounds before the first decision", check=_pos, rule="> 0"),
        "max_rounds": Key(int, 40, "ab stage: round budget", check=_pos, rule="> 0"),
        "wide_rounds": Key(int, 200, "ab stage: when the geomean says keep but some workload's bound is still too "
                           "wide to say it is no slower, those workloads alone are timed on, each until it is "
                           "within the guard, up to this many rounds (at most 5x max_rounds)", check=_pos, rule="> 0"),
        "min_effect": Key(float, 0.01, "keep only if faster than parent by at least this fraction",
                          check=_frac, rule="in [0, 1)"),
        "confidence": Key(float, 0.95, "confidence level of the interval", check=lambda x: 0.5 <= x < 1,
                          rule="in [0.5, 1)"),
        "inconclusive": Key(str, "revert", "verdict when the interval is not decisive", ("revert", "keep")),
        "objective": Key(str, "geomean", "what faster means, judged on every workload the backend can run: geomean "
                         "(geometric mean of candidate/parent device-time ratios), contest (FlashInfer-Bench score: "
                         "mean speedup over the reference), total (sum of latencies)", ("geomean", "contest", "total")),
        "guard": Key(float, 0.02, "revert when any one workload is slower than its parent by more than this "
                     "fraction, with confidence", check=_frac, rule="in [0, 1)"),
        "parent_drift": Key(float, 0.10, "block a keep (a harness error) when the trunk's kernel ran, as the parent, "
                            "more than this fraction slower than when it was kept on any workload timed both times "
                            "(same backend, GPU, driver and timer): something slowed the parent; 0 turns "
                            "the check off (loop/drift.py)", check=_frac, rule="in [0, 1)"),
        "untimed": Key(str, "hold", "a correct candidate on an untimed backend (CPU): hold it (an untimed "
                       "ref, not merged) for a timed backend, or merge it on correctness alone", ("hold", "merge")),
        "timer": Key(str, "cupti", "device timer (bench/judge/timer.py): cupti counts every kernel's device time and "
                     "is the least noisy on us-scale kernels; cudagraph and events do not see work a kernel overlaps "
                     "with the timer's flushes on a stream of its own, so they are for kernels you trust",
                     ("cupti", "cudagraph", "events")),
        "timeout_s": Key(int, 600, "one benchmark job's time limit in seconds", check=_pos, rule="> 0"),
        "reference_timeout_s": Key(int, 60, "time limit of the definition's reference check (init, bench, a changed "
                                   "definition), on its smallest workload, in seconds", check=_pos, rule="> 0"),
        "hook_mode": Key(str, "background", "hand commits: benchmark in the background or block",
                         ("background", "foreground")),
        "usd_per_gpu_hour": Key(float, 0.0, "price of one GPU-hour on this backend: each experiment's GPU-seconds are "
                                "priced into its cost and count against --budget-usd; 0: GPU time is free",
                                check=lambda x: x >= 0, rule=">= 0"),
        "profile": Key(str, "ncu", "after the first verdict and every keep, profile the trunk's kernel with Nsight "
                       "Compute (local backend, ncu on PATH; outside the timed runs) for the agents' view; off: never",
                       ("ncu", "off")),
        "kernel_start": Key(str, "auto", "how the judge starts each kernel's process: fork (from a copy of the judge "
                            "made before it read its job: no second torch import), exec (a fresh interpreter), or auto "
                            "(auto: fork, on CPU and GPU alike)", ("auto", "fork", "exec")),
        "judge_start": Key(str, "auto", "how each job's judge process starts: fork (from a judge template, one "
                           "fresh interpreter a runner thread that imported torch and no job: no torch import a job), "
                           "exec (a fresh interpreter), or auto (auto: fork)", ("auto", "fork", "exec")),
        "cpu_max_numel": Key(int, 1 << 20, "interpret backend: skip workloads with more input elements",
                             check=_pos, rule="> 0"),
        "cpu_extra_checks_max_numel": Key(int, 1 << 17, "interpret backend: workloads with more input elements "
                                          "are checked on one N(0,1) input set only (no further fresh sets, repeat, "
                                          "stress sets or unlisted shape; the smallest workload of a job always gets "
                                          "them all); a GPU checks every workload in full",
                                          check=_pos, rule="> 0"),
    },
    "agent": {
        "kind": Key(str, "auto", "who proposes changes; auto: anthropic with ANTHROPIC_API_KEY, else tune",
                    ("auto", "tune", "anthropic", "command")),
        "model": Key(str, "claude-sonnet-5-5", "model for the anthropic agent (and research, unless [research] model)"),
        "budget_usd": Key(float, 0.0, "stop the loop past this spend; 0: no limit",
                          check=lambda x: x >= 0, rule=">= 0"),
        "max_iterations": Key(int, 0, "stop after this many experiments; 0: no limit",
                              check=lambda x: x >= 0, rule=">= 0"),
        "editable": Key(list, ["kernel.py"], "globs (relative to the target) an agent may change",
                        check=lambda x: bool(x) and all(_inside(g) for g in x),
                        rule="a non-empty list of globs inside the target's folder (no '..', not absolute), "
                             "e.g. [\"kernel.py\"]"),
        "command": Key(str, "", "command agent: the CLI to run, e.g. 'claude -p'", check=lambda x: _splits(x),
                       rule="a command line whose quotes are balanced, e.g. \"claude -p\""),
        "max_turns": Key(int, 30, "anthropic agent: tool-use turns per experiment", check=_pos, rule="> 0"),
        "max_tokens": Key(int, 1_000_000, "anthropic agent: tokens (input + output) per experiment; 0: no limit",
                          check=lambda x: x >= 0, rule=">= 0"),
        "max_output_tokens": Key(int, 8192, "anthropic agent: output tokens per request", check=_pos, rule="> 0"),
        "retries": Key(int, 5, "anthropic agent: retries of a request on 429, 529, 5xx and timeouts",
                       check=lambda x: x >= 0, rule=">= 0"),
        "retry_max_s": Key(float, 60.0, "anthropic agent: longest wait between retries, in seconds",
                           check=_pos, rule="> 0"),
        "timeout_s": Key(float, 600.0, "anthropic agent: one request's time limit in seconds", check=_pos, rule="> 0"),
        "prices": Key(dict, {}, "USD per million tokens by model prefix, [input, output(, cache write, cache read)]; "
                      "merged over the built-in table", check=lambda d: _price_table_ok(d),
                      rule='a table like {"my-model" = [3.0, 15.0]}'),
        "docs": Key(list, [], "repo-relative globs agents may read besides the target's files, e.g. ['docs/*.md']"),
        "command_timeout_s": Key(int, 1800, "command agent: time limit of one CLI run in seconds",
                                 check=_pos, rule="> 0"),
        "watch": Key(list, [], "command agent: paths outside the repository compared before and after each "
                     "run; a change there is undone and makes the experiment invalid, e.g. ['~/.bashrc', '/tmp/x']"),
        "watch_python": Key(bool, True, "command agent without an OS sandbox: compare the Python environment the "
                            "judge imports (standard library, site-packages, autogk's judge bytecode, the judge's Triton "
                            "cache) before and after "
                            "each run; a change stops the loop (agents/pyenv.py: a stat of every file there, twice a run)"),
        "sandbox": Key(str, "bwrap", "command agent: the OS sandbox it runs in; bwrap: only the worktree writable, "
                       "the repository's git directory and $HOME hidden (falls back to none, with a warning, where "
                       "bwrap cannot run); none: only the undo after the run", ("bwrap", "none")),
        "network": Key(bool, True, "command agent: whether its sandbox keeps the network (coding CLIs call their "
                       "API over it); false: bwrap gives it none"),
    },
    "research": {
        "agent": Key(str, "auto", "who writes research plans; auto: anthropic with ANTHROPIC_API_KEY, else offline",
                     ("auto", "anthropic", "offline")),
        "model": Key(str, "", "model for research plans; empty: [agent] model"),
        "max_turns": Key(int, 15, "research agent: tool-use turns per plan", check=_pos, rule="> 0"),
        "plateau": Key(int, 5, "plateau trigger: this many experiments in a row within plateau_tol; 0: off",
                       check=lambda x: x >= 0, rule=">= 0"),
        "plateau_tol": Key(float, 0.05, "plateau trigger: relative spread of their figures", check=_frac,
                           rule="in [0, 1)"),
        "wall": Key(int, 3, "correctness-wall trigger: this many incorrect experiments in a row; 0: off",
                    check=lambda x: x >= 0, rule=">= 0"),
        "repeat": Key(bool, True, "repeat trigger: a proposal repeats a kernel already tried"),
        "follow": Key(int, 3, "experiments that follow (and link to) one plan", check=_pos, rule="> 0"),
    },
    "search": {
        "strategy": Key(str, "trunk", "which node the next experiment branches from: trunk (always the trunk tip), "
                        "beam (the trunk and the best width-1 other nodes), best (best-first with exploration); "
                        "see loop/search.py", ("trunk", "beam", "best")),
        "width": Key(int, 3, "beam: nodes the next experiments branch from, the trunk included", check=_pos, rule="> 0"),
        "exploration": Key(float, 0.5, "best: weight of the exploration term (0: always the best node)",
                           check=lambda x: x >= 0, rule=">= 0"),
        "near_miss": Key(float, 0.05, "beam/best, the offline tuner: search on from a node at most this fraction "
                         "slower than the trunk (a near-miss); slower ones are left", check=lambda x: x >= 0,
                         rule=">= 0"),
        "floor_share": Key(float, 0.0, "stop the loop once the trunk reaches this share of every workload's floor "
                           "(floor time / latency, e.g. 0.95); 0: never", check=lambda x: 0 <= x <= 1,
                           rule="in [0, 1]"),
    },
    "tracking": {
        "enabled": Key(bool, True, "log results to MLflow"),
        "uri": Key(str, "", "MLflow tracking URI; empty: sqlite:///<project>/mlruns/mlflow.db"),
        "artifacts": Key(str, "", "artifact root; empty: <project>/mlruns/artifacts"),
    },
    "modal": {
        "app": Key(str, "autogk-bench", "Modal app name (an ephemeral app per `autogk iterate`)"),
        "gpu": Key(str, "B200", "Modal GPU type, e.g. B200, H200, H100, A100-80GB"),
        "timeout_s": Key(int, 900, "Modal function timeout in seconds (image pull and first compiles count)",
                         check=_pos, rule="> 0"),
        "retries": Key(int, 1, "retries of a job after a preemption or a dropped connection",
                       check=lambda x: x >= 0, rule=">= 0"),
        "python": Key(str, "3.12", "image Python version"),
        "torch": Key(str, "2.9.1", "image torch version (pinned; recorded in every result)"),
        "triton": Key(str, "3.5.1", "image triton version (pinned; must match the torch pin)"),
        "safetensors": Key(str, "0.6.2", "image safetensors version (for workloads with blobs)"),
        "connect_timeout_s": Key(int, 20, "give up when Modal's API does not answer within this many seconds",
                                 check=_pos, rule="> 0"),
        "inline_blobs_mb": Key(int, 32, "blobs up to this many MiB per job travel inside the call",
                               check=lambda x: x >= 0, rule=">= 0"),
        "volume": Key(str, "autogk-blobs", "Modal Volume for larger blobs; empty: refuse larger blobs"),
    },
    "slurm": {
        "partition": Key(str, "", "partition the jobs go to (sbatch --partition); empty: the cluster's default"),
        "gres": Key(str, "", "generic resources per job, e.g. 'gpu:1' or 'gpu:h200:1' (sbatch --gres); empty: none"),
        "inside": Key(str, "local", "what the job runs: local (its GPUs, timed) or interpret (CPU, a CPU partition)",
                      ("local", "interpret")),
        "time": Key(str, "", "job time limit in SLURM's format ('30', '1:00:00'); empty: [bench] timeout_s + 2 min"),
        "cpus": Key(int, 2, "CPUs per job (sbatch --cpus-per-task)", check=_pos, rule="> 0"),
        "mem": Key(str, "", "memory per job, e.g. '32G' (sbatch --mem); empty: the partition's default"),
        "account": Key(str, "", "account to charge (sbatch --account); empty: your default"),
        "qos": Key(str, "", "quality of service (sbatch --qos); empty: the default"),
        "sbatch": Key(list, [], "more sbatch options, one per item, e.g. ['--constraint=h200', '--exclusive']"),
        "setup": Key(str, "", "shell lines the job runs before the worker, e.g. 'module load cuda; source venv/bin/activate'"),
        "python": Key(str, "", "the Python with autogk installed, as the compute node sees it; empty: this one"),
        "shared": Key(str, "", "folder for job files that the login and compute nodes both see; "
                      "empty: ~/.autogk/slurm (home is shared on most clusters)"),
        "poll_s": Key(float, 2.0, "seconds between squeue queries", check=_pos, rule="> 0"),
        "retries": Key(int, 1, "resubmissions after a node failure or preemption",
                       check=lambda x: x >= 0, rule=">= 0"),
    },
}


class Config:
    """Validated settings: `cfg.bench.reps`, `cfg["bench"]["reps"]`."""

    def __init__(self, data: dict[str, dict[str, Any]], path: Path | None = None) -> None:
        self._data = data
        self.path = path

    def __getitem__(self, section: str) -> dict[str, Any]:
        return self._data[section]

    def __getattr__(self, section: str) -> Any:
        if section.startswith("_") or section not in self._data:
            raise AttributeError(section)
        return _Section(self._data[section])

    def as_dict(self) -> dict[str, dict[str, Any]]:
        return {s: dict(v) for s, v in self._data.items()}


class _Section:
    def __init__(self, values: dict[str, Any]) -> None:
        self.__dict__.update(values)


# Upper bounds past which a count is a typo, not a wish (reps = 30000000 would time one workload for days).
# trials: a workload's correctness sets are drawn at trial numbers 0 to trials - 1, trials + 7, 101 and 113,
# the parent's the same from 500 on (bench/judge/checks.py: OWN_SETS), the next workload's from 1009: up to
# 90 no two of them meet (tests/bench/judge/test_checks.py).
UPPER: dict[tuple[str, str], float] = {
    ("bench", "reps"): 100_000, ("bench", "trials"): 90, ("bench", "warmup"): 100_000, ("bench", "timing_mem_mb"): 1 << 20,
    ("bench", "stride"): 1_000_000, ("bench", "min_rounds"): 10_000, ("bench", "max_rounds"): 100_000,
    ("bench", "timeout_s"): 7 * 86400, ("bench", "reference_timeout_s"): 86400, ("agent", "command_timeout_s"): 7 * 86400,
    ("agent", "max_turns"): 100_000, ("research", "max_turns"): 100_000,
}


def _coerce(section: str, key: str, spec: Key, value: Any, where: str) -> Any:
    name = f"[{section}] {key}"
    if spec.type is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if spec.type is list and isinstance(value, list):
        if not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{where}: {name} must be a list of strings", f"e.g. {key} = {spec.default!r}")
    elif not isinstance(value, spec.type) or (spec.type is int and isinstance(value, bool)):
        raise ConfigError(
            f"{where}: {name} must be {getattr(spec.type, '__name__', spec.type)}, got {value!r}",
            f"set it like: {key} = {_toml(spec.default)}  ({spec.doc})")
    if spec.choices is not None and value not in spec.choices:
        raise ConfigError(f"{where}: {name} = {value!r} is not one of {', '.join(map(str, spec.choices))}",
                          f"set {key} to one of: {', '.join(map(repr, spec.choices))}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"{where}: {name} = {value!r} must be a finite number",
                          f"default: {key} = {_toml(spec.default)}  ({spec.doc})")
    most = UPPER.get((section, key))
    if most is not None and isinstance(value, (int, float)) and value > most:
        raise ConfigError(f"{where}: {name} = {value!r} is beyond any sensible value (at most {most})",
                          f"default: {key} = {_toml(spec.default)}  ({spec.doc})")
    if spec.check is not None and not spec.check(value):
        raise ConfigError(f"{where}: {name} = {value!r} must be {spec.rule}",
                          f"default: {key} = {_toml(spec.default)}  ({spec.doc})")
    return value


def _toml(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return f'"{v}"'
    if isinstance(v, list):
        return "[" + ", ".join(_toml(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_toml(k)} = {_toml(x)}" for k, x in v.items()) + "}"
    return repr(v)


def _from_env(spec: Key, raw: str) -> Any:
    if spec.type is bool:
        return raw.strip().lower() in ("1", "true", "yes", "on")
    if spec.type is int:
        try:
            return int(raw)
        except ValueError:
            return raw
    if spec.type is float:
        try:
            return float(raw)
        except ValueError:
            return raw
    if spec.type is list:
        return [p.strip() for p in raw.split(",") if p.strip()]
    if spec.type is dict:  # a JSON object, e.g. AUTOGK_AGENT_PRICES='{"my-model": [1, 5]}'
        import json
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    return raw


def parse(data: dict[str, Any], where: str = CONFIG_NAME, environ: dict[str, str] | None = None) -> Config:
    """Validate raw TOML data, fill defaults, apply AUTOGK_<SECTION>_<KEY> overrides."""
    environ = os.environ if environ is None else environ
    out: dict[str, dict[str, Any]] = {}
    for section, value in data.items():
        if section not in SCHEMA:
            raise ConfigError(f"{where}: unknown section [{section}]",
                              f"known sections: {', '.join(f'[{s}]' for s in SCHEMA)}")
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: [{section}] must be a table", f"write it as [{section}] with keys below")
        for key in value:
            if key not in SCHEMA[section]:
                raise ConfigError(f"{where}: unknown key '{key}' in [{section}]",
                                  f"known keys in [{section}]: {', '.join(SCHEMA[section])}")
    for section, keys in SCHEMA.items():
        out[section] = {}
        for key, spec in keys.items():
            env_name = config_override_name(section, key)
            if env_name in environ:
                out[section][key] = _coerce(section, key, spec, _from_env(spec, environ[env_name]), env_name)
            elif key in data.get(section, {}):
                out[section][key] = _coerce(section, key, spec, data[section][key], where)
            else:
                out[section][key] = spec.default
    bench = out["bench"]
    if bench["min_rounds"] > bench["max_rounds"]:
        raise ConfigError(f"{where}: [bench] min_rounds = {bench['min_rounds']} is over max_rounds = "
                          f"{bench['max_rounds']}: the judge would stop before its first decision",
                          f"set min_rounds <= max_rounds (defaults: min_rounds = {SCHEMA['bench']['min_rounds'].default}, "
                          f"max_rounds = {SCHEMA['bench']['max_rounds'].default})")
    return Config(out)


def load(root: Path) -> Config:
    path = root / CONFIG_NAME
    try:
        text = read_bytes(path, CONFIG_NAME, MAX_CONFIG_BYTES, ConfigError).decode("utf-8")
    except FileNotFoundError:
        raise ConfigError(f"no {CONFIG_NAME} in {root}", "run `autogk init` to make this an autogk project") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: not UTF-8 text (bad byte at offset {e.start})",
                          f"save {CONFIG_NAME} as UTF-8 (e.g. iconv -f latin1 -t utf-8)") from None
    cfg = loads(text, str(path))
    cfg.path = path
    return cfg


def loads(text: str, where: str, environ: dict[str, str] | None = None) -> Config:
    """A config from TOML text (a file's, or a commit's: `where` names it in errors)."""
    try:
        data = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError) as e:
        raise ConfigError(f"{where}: not valid TOML: {e}", f"fix the syntax in {CONFIG_NAME}") from None
    return parse(data, where=where, environ=environ)


SECTION_NOTES = {
    "modal": ("Modal runs benchmarks on a datacenter GPU: [bench] backend = \"modal\" or `autogk iterate --backend modal`.",
              "Its token comes from `modal token new` (~/.modal.toml) or MODAL_TOKEN_ID/MODAL_TOKEN_SECRET, never from here;",
              "`autogk doctor` says whether it is set up. The image is pinned by python/torch/triton/safetensors below."),
    "slurm": ("SLURM runs each benchmark as one sbatch job: [bench] backend = \"slurm\". The shared folder must be",
              "visible from the compute nodes; `autogk doctor` submits a probe job to check it."),
}


def render_default(trunk: str, target: str) -> str:
    """The config `autogk init` writes: the chosen values, every other key as a comment."""
    lines = ["# autogk project settings. Every key is optional; the commented values are the defaults.",
             "# Environment variables override keys: AUTOGK_<SECTION>_<KEY>, e.g. AUTOGK_BENCH_BACKEND=interpret.",
             "# Secrets (ANTHROPIC_API_KEY, MODAL_TOKEN_ID/SECRET) come from the environment only.", ""]
    chosen = {("project", "trunk"): trunk, ("project", "target"): target}
    for section, keys in SCHEMA.items():
        lines += [f"# {n}" for n in SECTION_NOTES.get(section, ())]
        lines.append(f"[{section}]")
        for key, spec in keys.items():
            if (section, key) in chosen:
                lines.append(f"{key} = {_toml(chosen[(section, key)])}")
            else:
                choices = f" [{' | '.join(map(str, spec.choices))}]" if spec.choices else ""
                lines.append(f"# {key} = {_toml(spec.default)}  # {spec.doc}{choices}")
        lines.append("")
    return "\n".join(lines)
