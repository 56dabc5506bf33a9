"""A project (a git repo with `.autogk.toml`) and its targets (`<[project] targets>/<target>/`, `kernels/` by default).

The only module that knows where a target's files live: everything else asks a Target for `rel`, `dir`
or one of its paths.
"""
from __future__ import annotations

import fnmatch
import json
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from autogk_git import config as config_mod
from autogk_git.errors import AutogkError, InputDataNeeded, NotAProject, TargetError
from autogk_git.files import read_bytes, safe_repo_path
from autogk_git.git import worktrees

INT_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "bool")
DTYPES = ("float64", "float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", *INT_DTYPES)


def read_text(path: Path, what: str) -> str:
    """A UTF-8 text file; one that is not is an error naming it, never a UnicodeDecodeError."""
    data = read_bytes(path, what, error=TargetError)  # a FIFO, device, loop or huge file: refused, never read
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise TargetError(f"{path}: {what} is not UTF-8 text (bad byte at offset {e.start})",
                          f"save {path.name} as UTF-8") from None


def read_jsonl(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-blank line; a bad line is an error naming it."""
    out = []
    for i, line in enumerate(read_text(path, "the workloads file").splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except (json.JSONDecodeError, RecursionError) as e:
            raise TargetError(f"{path}:{i}: not valid JSON: {e}", "fix that line") from None
        if not isinstance(obj, dict):
            raise TargetError(f"{path}:{i}: a workload line is a JSON object, got {type(obj).__name__}",
                              'write lines like {"workload": {"uuid": ..., "axes": {...}, "inputs": {...}}}')
        out.append((i, obj))
    return out


# The files that judge a kernel: never editable, whatever `[agent] editable` says (a glob such as `*.py`
# would otherwise reach the generator and its compare rules). Globs relative to the target's folder.
# reference.py: the target's fast reference, trusted once proven equal to the definition's (bench/refproof.py).
FAST_REFERENCE = "reference.py"
JUDGE_FILES = ("definition.json", "workloads.jsonl", "inputs.py", FAST_REFERENCE, "*.safetensors", "blob/*", "blobs/*")


def editable_match(repo_path: str, target_rel: str, globs: list[str]) -> bool:
    """True when a repo-relative path is one of a target's editable files: under its folder, matching
    one of the editable globs, and not one of the files that judge it. The one matcher every guard uses."""
    prefix = target_rel.rstrip("/") + "/"
    if not repo_path.startswith(prefix) or not safe_repo_path(repo_path):  # `..` leaves the folder
        return False
    rel = repo_path[len(prefix):]
    if any(fnmatch.fnmatch(rel, g) for g in JUDGE_FILES):
        return False
    return any(fnmatch.fnmatch(rel, g) for g in globs)


_WARNED: set[Path] = set()


def warn_bad_config(root: Path) -> None:
    """Read commands (log, show) need no config; one that does not load is still said, once a process:
    silence would let the next `iterate` be the first to tell."""
    if root in _WARNED:
        return
    _WARNED.add(root)
    try:
        config_mod.load(root)
    except AutogkError as e:
        import sys
        print(f"warning: {e.message}" + (f" ({e.hint})" if e.hint else "") + "; read commands go on without it",
              file=sys.stderr)


def find_root(start: Path | None = None, warn: bool = True) -> Path:
    """The top of the worktree that holds `.autogk.toml` (warn: say once if it does not load)."""
    start = (start or Path.cwd()).resolve()
    for p in (start, *start.parents):
        if (p / config_mod.CONFIG_NAME).is_file():
            if warn:
                warn_bad_config(p)
            return p
    raise NotAProject(f"{start} is not inside an autogk project (no {config_mod.CONFIG_NAME} found)",
                      "run `autogk init` here, or cd into a project")


@dataclass
class Target:
    """One kernel under optimization: definition, workloads, kernel, program notes."""

    name: str
    dir: Path
    editable: list[str] = field(default_factory=lambda: ["kernel.py"])
    targets_dir: str = "kernels"

    @property
    def rel(self) -> str:
        """The target's folder, relative to the repository root."""
        return f"{self.targets_dir}/{self.name}"

    def at(self, root: Path) -> "Target":
        """The same target in another checkout of the repository (a worktree)."""
        return Target(self.name, Path(root) / self.rel, list(self.editable), self.targets_dir)

    def file_rel(self, name: str) -> str:
        """A file of the target, relative to the repository root (`kernel.py` -> `kernels/t/kernel.py`)."""
        return f"{self.rel}/{name}"

    @cached_property
    def definition(self) -> dict[str, Any]:
        path = self.dir / "definition.json"
        try:
            data = json.loads(read_text(path, "the definition"))
        except FileNotFoundError:
            raise TargetError(f"target {self.name}: {path} is missing",
                              f"add a FlashInfer-Bench definition, or `autogk init --definition FILE`") from None
        except (json.JSONDecodeError, RecursionError) as e:
            raise TargetError(f"target {self.name}: {path} is not valid JSON: {e}", "fix the file") from None
        check_definition(data, str(path))
        return data

    @cached_property
    def workloads(self) -> list[dict[str, Any]]:
        """The `workload` objects of workloads.jsonl, in file order."""
        path = self.dir / "workloads.jsonl"
        if not path.exists():
            raise TargetError(f"target {self.name}: {path} is missing",
                              "add FlashInfer-Bench workload lines (one JSON object per line)")
        out, seen = [], {}
        for i, obj in read_jsonl(path):
            wl = obj.get("workload", obj)
            check_workload(wl, f"{path}:{i}", self.definition)
            check_unique(wl, f"{path}:{i}", seen)
            out.append(wl)
        if not out:
            raise TargetError(f"target {self.name}: {path} has no workloads", "add at least one workload line")
        return out

    @property
    def kernel_path(self) -> Path:
        return self.dir / "kernel.py"

    @property
    def generator_path(self) -> Path:
        return self.dir / "inputs.py"

    @property
    def program_path(self) -> Path:
        return self.dir / "program.md"

    def kernel_source(self) -> str:
        try:
            return read_text(self.kernel_path, "the kernel")
        except FileNotFoundError:
            raise TargetError(f"target {self.name}: {self.kernel_path} is missing",
                              "restore it from the trunk: git checkout <trunk> -- " + f"{self.rel}/kernel.py") from None

    def generator_source(self) -> str | None:
        return read_text(self.generator_path, "the input generator") if self.generator_path.exists() else None

    def is_editable(self, repo_path: str) -> bool:
        """True when a repo-relative path is one of this target's editable files."""
        return editable_match(repo_path, self.rel, self.editable)

    def inputs_needing_data(self) -> list[str]:
        """Inputs random data cannot stand for, and that no generator or blob provides."""
        if self.generator_path.exists():
            return []
        need = []
        for name, spec in self.definition["inputs"].items():
            if spec.get("shape") is not None and spec.get("dtype") in INT_DTYPES:
                if any(wl.get("inputs", {}).get(name, {}).get("type", "random") == "random" for wl in self.workloads):
                    need.append(name)
        return need


def target_rel(config: config_mod.Config, name: str) -> str:
    """A target's folder relative to the repository root, as a config names it."""
    return f"{config.project.targets}/{name}"


def configured_target(config: config_mod.Config, name: str, folder: Path) -> Target:
    """Target name as config describes it (its editable files), its files in folder: a checkout's
    own, or a commit's written out elsewhere (the trunk's snapshot)."""
    return Target(name, folder, list(config.agent.editable), config.project.targets)


def new_target(root: Path, name: str) -> Target:
    """Where a target that does not exist yet goes in the repository at root: under the config's targets
    folder, or the default one while the repository has no config (`autogk init` writes it)."""
    if (root / config_mod.CONFIG_NAME).exists():
        targets = config_mod.load(root).project.targets
    else:
        targets = config_mod.SCHEMA["project"]["targets"].default
    return Target(name, root / targets / name, targets_dir=targets)


LINE = 'write lines like {"workload": {"uuid": "...", "axes": {"n": 1024}, "inputs": {"x": {"type": "random"}}}}'
FORMAT = "see FlashInfer-Bench's Definition format (docs: name, axes, inputs, outputs, reference)"


def check_definition(data: Any, where: str) -> None:
    """Structural checks that give clear messages; flashinfer-bench's model runs too when installed."""
    def bad(what: str, hint: str = FORMAT) -> TargetError:
        return TargetError(f"{where}: {what}", hint)

    if not isinstance(data, dict):
        raise bad("a definition is a JSON object")
    for key in ("name", "axes", "inputs", "outputs", "reference"):
        if key not in data:
            raise bad(f"the definition has no '{key}'",
                      "a FlashInfer-Bench definition needs name, axes, inputs, outputs, reference")
    if not isinstance(data["name"], str) or not data["name"].strip():
        raise bad(f"'name' must be a non-empty string, got {data['name']!r:.60}")
    axes = data["axes"]
    if not isinstance(axes, dict):
        raise bad(f"'axes' must be an object of axis name -> {{\"type\": \"var\"}} or "
                  f"{{\"type\": \"const\", \"value\": N}}, got {type(axes).__name__}")
    for name, ax in axes.items():
        if not isinstance(ax, dict) or ax.get("type") not in ("var", "const"):
            raise bad(f"axis '{name}' must be {{\"type\": \"var\"}} or {{\"type\": \"const\", \"value\": N}}, "
                      f"got {ax!r:.80}")
        if ax["type"] == "const":
            v = ax.get("value")
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise bad(f"const axis '{name}' needs a non-negative integer 'value', got {v!r:.40}",
                          f'write it as "{name}": {{"type": "const", "value": 128}}')
    for section in ("inputs", "outputs"):
        tensors = data[section]
        if not isinstance(tensors, dict):
            raise bad(f"'{section}' must be an object of name -> {{\"shape\": [...], \"dtype\": ...}}, "
                      f"got {type(tensors).__name__}")
        if section == "outputs" and not tensors:
            raise bad("'outputs' is empty: a kernel must produce at least one output",
                      'declare one, e.g. "outputs": {"out": {"shape": ["n"], "dtype": "float32"}}')
        for tname, spec in tensors.items():
            if not isinstance(spec, dict):
                raise bad(f"{section}.{tname} must be an object with 'shape' and 'dtype', got {spec!r:.60}")
            if spec.get("dtype") not in DTYPES:
                raise bad(f"{section}.{tname} has dtype {spec.get('dtype')!r:.40}, which autogk does not know",
                          f"use one of: {', '.join(DTYPES)}")
            shape = spec.get("shape")
            if shape is not None and not isinstance(shape, list):
                raise bad(f"{section}.{tname}: 'shape' must be a list of axis names or null, got {shape!r:.60}")
            for dim in shape or []:
                if not isinstance(dim, str) or dim not in axes:
                    raise bad(f"{section}.{tname} uses axis {dim!r:.40}, which is not in axes",
                              f"declare {dim!r:.40} under axes")
    ref = data["reference"]
    if not isinstance(ref, str):
        raise bad(f"'reference' must be Python source text (a string), got {type(ref).__name__}",
                  "write the reference as a string holding `def run(...)`")
    if "def run(" not in ref:
        raise bad("the reference defines no run()", "the reference must define run(...)")


# A uuid names a workload in refs, notes, MLflow keys and command lines: a long one is a mistake, and one
# of megabytes overflowed the argument list of the processes it was passed to.
MAX_UUID = 128
INPUT_TYPES = ("random", "scalar", "safetensors")


def check_workload(wl: Any, where: str, definition: dict[str, Any]) -> None:
    """One workload object against its definition: a short uuid, an integer for every variable axis and
    no other axis, only the definition's inputs, each an object of a known type."""
    if not isinstance(wl, dict):
        raise TargetError(f"{where}: 'workload' must be a JSON object, got {type(wl).__name__}", LINE)
    if "axes" not in wl or "uuid" not in wl:
        raise TargetError(f"{where}: a workload needs 'uuid' and 'axes'", LINE)
    if not isinstance(wl["uuid"], str) or not wl["uuid"]:
        raise TargetError(f"{where}: 'uuid' must be a non-empty string, got {wl['uuid']!r:.40}", LINE)
    if len(wl["uuid"]) > MAX_UUID or not wl["uuid"].isprintable():
        raise TargetError(f"{where}: 'uuid' must be at most {MAX_UUID} printable characters, got "
                          f"{len(wl['uuid'])} starting {wl['uuid'][:20]!r}",
                          "use a UUID like 8d5c6f3e-...: python -c 'import uuid; print(uuid.uuid4())'")
    axes = wl["axes"]
    if not isinstance(axes, dict):
        raise TargetError(f"{where}: 'axes' must be an object of axis name -> integer, got {axes!r:.60}", LINE)
    declared = definition["axes"]
    for name, v in axes.items():
        if name not in declared:
            raise TargetError(f"{where}: axis {name!r:.40} is not an axis of definition {definition['name']}",
                              f"its axes: {', '.join(declared) or 'none'}; remove {name!r:.40} or fix its spelling")
        if declared[name]["type"] == "const" and v != declared[name].get("value"):
            raise TargetError(f"{where}: axis '{name}' is const {declared[name].get('value')} in the definition; "
                              f"a workload cannot set it to {v!r:.40}",
                              f"remove '{name}' from the line's axes (it is always {declared[name].get('value')})")
    for name, ax in definition["axes"].items():
        if ax["type"] != "var":
            continue
        v = axes.get(name)
        if not isinstance(v, int) or isinstance(v, bool) or v < 0 or v > 1 << 40:
            raise TargetError(f"{where}: variable axis '{name}' needs a non-negative integer, got {v!r:.40}",
                              f"give it in the line's axes, e.g. \"{name}\": 1024")
    inputs = wl.get("inputs", {})
    if not isinstance(inputs, dict):
        raise TargetError(f"{where}: 'inputs' must be an object of input name -> {{\"type\": ...}}, "
                          f"got {type(inputs).__name__}", LINE)
    for name, spec in inputs.items():
        if not isinstance(spec, dict) or not isinstance(spec.get("type", "random"), str):
            raise TargetError(f"{where}: input '{name}' must be an object like {{\"type\": \"random\"}}, "
                              f"got {spec!r:.60}", LINE)
        if name not in definition["inputs"]:
            raise TargetError(f"{where}: input {name!r:.40} is not an input of definition {definition['name']}",
                              f"its inputs: {', '.join(definition['inputs'])}; remove {name!r:.40} or fix its spelling")
        kind = spec.get("type", "random")
        if kind not in INPUT_TYPES:
            raise TargetError(f"{where}: input '{name}' has type {kind!r:.40}, which autogk does not know",
                              f"use one of: {', '.join(INPUT_TYPES)}")
        if kind == "scalar" and (not isinstance(spec.get("value"), (int, float)) or isinstance(spec.get("value"), bool)):
            raise TargetError(f"{where}: scalar input '{name}' needs a numeric 'value', got {spec.get('value')!r:.40}",
                              f'write it as "{name}": {{"type": "scalar", "value": 1.5}}')


def check_unique(wl: dict[str, Any], where: str, seen: dict[str, str]) -> None:
    """A workload's uuid not used by an earlier line (seen: uuid -> where it was); results are keyed by it."""
    first = seen.setdefault(wl["uuid"], where)
    if first != where:
        same_file = first.rsplit(":", 1)[0] == where.rsplit(":", 1)[0]
        raise TargetError(f"{where}: uuid {wl['uuid']} is used twice (first "
                          + (f"on line {first.rsplit(':', 1)[-1]})" if same_file else f"at {first})"),
                          "give each workload line its own uuid")


def input_data_message(target: Target, need: list[str]) -> str:
    return (f"inputs {', '.join(need)} of target {target.name} are integer tensors (indices, lengths, page "
            "tables): random data cannot stand for them, so autogk cannot check this target until you "
            "provide them:\n"
            f"  - a generator: {target.rel}/inputs.py defining generate(axes, definition, seed, device) that "
            f"returns a dict with valid tensors for {', '.join(need)}, or\n"
            "  - workloads whose inputs for them are safetensors blobs: "
            "autogk init --definition FILE --workloads WORKLOADS.jsonl")


def require_input_data(target: Target) -> None:
    """Raise InputDataNeeded, saying what to provide, when random data cannot stand for some inputs."""
    target.definition, target.workloads  # noqa: B018 - both files checked before any work starts
    need = target.inputs_needing_data()
    if need:
        raise InputDataNeeded(input_data_message(target, need), f"then check it with: autogk bench --target {target.name}")


class Project:
    """The repository root, its config and its targets."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.config = config_mod.load(root)

    @classmethod
    def find(cls, start: Path | None = None) -> "Project":
        return cls(find_root(start, warn=False))  # its config is loaded on use: an error then says it

    @cached_property
    def git_common_dir(self) -> Path:
        return worktrees.common_dir(self.root)

    @property
    def state_dir(self) -> Path:
        """autogk's private state (lock, worktrees, logs), inside the git directory."""
        d = self.git_common_dir / "autogk"
        d.mkdir(parents=True, exist_ok=True)
        return d

    def artifact_dir(self, target: str) -> Path:
        """Files autogk writes about a target for agents to read (profiles, the workload view)."""
        return self.state_dir / "artifacts" / target

    @property
    def trunk(self) -> str:
        return self.config.project.trunk

    @property
    def targets_dir(self) -> Path:
        return self.root / self.config.project.targets

    def target_rel(self, name: str) -> str:
        """A target's folder relative to the root, whether or not it exists in this checkout."""
        return target_rel(self.config, name)

    def target_names(self) -> list[str]:
        kdir = self.targets_dir
        if not kdir.is_dir():
            return []
        return sorted(p.name for p in kdir.iterdir() if (p / "definition.json").exists())

    def target(self, name: str | None = None) -> Target:
        names = self.target_names()
        name = name or self.config.project.target
        if not name:
            if len(names) == 1:
                name = names[0]
            elif not names:
                raise TargetError(f"no targets under {self.targets_dir}",
                                  "add one: autogk init --definition FILE  (or --example rmsnorm_h4096)")
            else:
                raise TargetError(f"several targets ({', '.join(names)}) and none chosen",
                                  "pass --target NAME, or set [project] target in .autogk.toml")
        if name not in names:
            raise TargetError(f"no target '{name}' under {self.config.project.targets}/",
                              f"known targets: {', '.join(names) or 'none'}")
        return configured_target(self.config, name, self.targets_dir / name)

    def layout_problems(self) -> list[str]:
        """What `iterate` would trip on in the targets' layout: the targets folder missing or a file, a
        folder that lost its definition, an unknown default target (doctor lists them)."""
        cfg, out = self.config, []
        tdir, names = self.targets_dir, self.target_names()
        if not tdir.is_dir():
            what = "is a file, not a folder" if tdir.exists() else "does not exist"
            out.append(f"[project] targets = {cfg.project.targets!r} {what} ({tdir}); fix: set it to the folder that "
                       "holds your targets (default: kernels), or add one: autogk init --here --definition FILE")
        else:
            for d in sorted(p for p in tdir.iterdir() if p.is_dir() and p.name not in names):
                if any((d / f).exists() for f in ("kernel.py", "workloads.jsonl", "program.md")):
                    out.append(f"{self.target_rel(d.name)}/ has no definition.json (renamed or deleted?), so it is "
                               f"no target; fix: git checkout {self.trunk} -- {self.target_rel(d.name)}/definition.json")
        if cfg.project.target and cfg.project.target not in names:
            out.append(f"[project] target = {cfg.project.target!r} is not a target under {cfg.project.targets}/ (known: "
                       f"{', '.join(names) or 'none'}); fix: set it to one of those, or remove it")
        return out

    @cached_property
    def main_root(self) -> Path:
        """The main worktree's top: where the shared store lives, whichever worktree we run in."""
        common = self.git_common_dir
        return common.parent if common.name == ".git" else self.root

    def tracking_uri(self) -> str:
        uri = self.config.tracking.uri
        return uri or f"sqlite:///{self.main_root / 'mlruns' / 'mlflow.db'}"

    def artifact_root(self) -> Path:
        a = self.config.tracking.artifacts
        return Path(a) if a else self.main_root / "mlruns" / "artifacts"
