"""Scaffolding a target: a definition (or a bundled example), its workloads and their blobs, a starting
kernel and program notes, checked and then written into the target's folder with the project's files.

Checks come before writes: a bad definition, workloads file, blob or kernel leaves no folder behind.
Where the folder goes is project.py's to say (`new_target`); committing it is the caller's.
"""
from __future__ import annotations

import json
import re
import shutil
import uuid
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Callable

from autogk_git import config as config_mod
from autogk_git import env
from autogk_git.errors import AutogkError, TargetError
from autogk_git.project import FAST_REFERENCE, Target, check_definition, check_unique, check_workload, read_jsonl, read_text

DEFAULT_VAR_VALUES = (1, 16, 128)
Say = Callable[[str], None]


DEFAULT_SET = "default"  # workloads.jsonl; another set NAME is workloads_NAME.jsonl beside it


def examples() -> list[str]:
    """The bundled targets, and the definitions they also serve (variants/<name>/: another page size)."""
    root = resources.files("autogk_git.examples")
    found = []
    for p in root.iterdir():
        if p.is_dir() and (p / "definition.json").is_file():
            found.append(p.name)
            v = p / "variants"
            found += [q.name for q in v.iterdir() if (q / "definition.json").is_file()] if v.is_dir() else []
    return sorted(found)


def example_dir(name: str) -> Path:
    return Path(str(resources.files("autogk_git.examples").joinpath(name)))


def bundled(name: str) -> tuple[Path, Path] | None:
    """(the example folder whose generator, kernel and program notes serve definition `name`, the folder
    holding that definition and its workload sets): the same folder for a bundled target, its
    variants/<name>/ for a variant (the ps1 sparse attention is served by the ps64 target's generator,
    which reads the page size from the definition). None when autogk bundles nothing for it."""
    root = resources.files("autogk_git.examples")
    for p in root.iterdir():
        if not p.is_dir() or not (p / "definition.json").is_file():
            continue
        if p.name == name:
            return Path(str(p)), Path(str(p))
        v = p / "variants" / name
        if (v / "definition.json").is_file():
            return Path(str(p)), Path(str(v))
    return None


def workload_sets(folder: Path) -> dict[str, Path]:
    """{set name: file} of a bundled definition: `default` is workloads.jsonl, NAME is workloads_NAME.jsonl."""
    sets = {DEFAULT_SET: folder / "workloads.jsonl"} if (folder / "workloads.jsonl").is_file() else {}
    sets.update((f.name[len("workloads_"):-len(".jsonl")], f) for f in sorted(folder.glob("workloads_*.jsonl")))
    return sets


def workload_set_files(folder: Path, definition_name: str, set_names: str | None) -> list[Path]:
    """The files of a bundled definition's workload sets: one name (None: the default) or several joined by
    commas (`default,long`: a project judged on both at once); an unknown or repeated name is an error
    listing the sets there are."""
    sets = workload_sets(folder)
    names = [n.strip() for n in (set_names or DEFAULT_SET).split(",")]
    hint = (f"its sets: {', '.join(sets)}; pass one as --workload-set NAME (without it: {DEFAULT_SET}) or several "
            "joined by commas, or your own file as --workloads FILE")
    for name in names:
        if name not in sets:
            raise AutogkError(f"the bundled {definition_name} has no workload set '{name}'", hint)
    if len(set(names)) != len(names):
        raise AutogkError(f"--workload-set {set_names}: a set is named twice", hint)
    return [sets[n] for n in names]


def read_workload_files(paths: list[Path], definition: dict[str, Any], blobs_dir: Path | None = None
                        ) -> tuple[list[dict[str, Any]], list[tuple[Path, str]]]:
    """read_workloads of each file, in order, as one set; a workload uuid in two of them is an error."""
    lines, blobs, seen = [], [], {}
    for path in paths:
        more, more_blobs = read_workloads(path, definition, blobs_dir, seen)
        lines += more
        blobs += more_blobs
    return lines, blobs


def best_kernels() -> list[str]:
    """Bundled targets that ship a best known kernel (autogk_git/best_kernels/<name>/kernel.py)."""
    root = resources.files("autogk_git.best_kernels")
    return sorted(p.name for p in root.iterdir() if p.is_dir() and (p / "kernel.py").is_file())


def best_kernel(source: "Source") -> tuple[str, str]:
    """(kernel text, where it came from) of the best known kernel of a bundled target, for `--start best`."""
    name = source.bundled.name if source.bundled else source.definition["name"]
    shipped = best_kernels()
    if name not in shipped:
        what = (f"the bundled target {name} ships no best known kernel (its runs kept nothing better than its "
                "starting kernel)" if source.bundled else f"{name} is not a bundled target, so no best known "
                "kernel ships with it")
        raise AutogkError(f"--start best: {what}; targets with one: {', '.join(shipped) or 'none'}",
                          "leave --start out to begin from the starting kernel: "
                          f"autogk init DIR {'--example ' + name if source.bundled else '--definition FILE'}")
    folder = _best_folder(name)
    return (folder / "kernel.py").read_text(), _origin(folder)


def _best_folder(name: str) -> Path:
    return Path(str(resources.files("autogk_git.best_kernels").joinpath(name)))


def _origin(folder: Path) -> str:
    """Where a shipped best kernel came from: its SOURCE.md's "From:" line, and the file."""
    note = folder / "SOURCE.md"
    lines = note.read_text().splitlines() if note.is_file() else []
    origin = next((ln[len("From:"):].strip() for ln in lines if ln.startswith("From:")), "origin not recorded")
    return f"{origin} (autogk_git/best_kernels/{folder.name}/SOURCE.md)"


def shipped_best(definition_name: str, kernel_text: str) -> str | None:
    """Where it came from, when kernel_text is the best known kernel autogk ships for this definition (what
    `--start best` put on a trunk); else None."""
    if definition_name not in best_kernels():
        return None
    folder = _best_folder(definition_name)
    return _origin(folder) if (folder / "kernel.py").read_text() == kernel_text else None


def is_sampling(definition: dict[str, Any]) -> bool:
    """A definition whose outputs are random draws (FlashInfer-Bench's sampling ops)."""
    words = [definition.get("name", ""), definition.get("op_type", ""), *definition.get("tags", [])]
    return any("sampling" in str(w).lower() for w in words)


def starting_kernel(definition: dict[str, Any]) -> str:
    """A kernel that is correct from the first commit: it calls the reference and writes the outputs."""
    ref = re.sub(r"^def run\(", "def _reference(", definition["reference"], count=1, flags=re.MULTILINE)
    ins, outs = list(definition["inputs"]), list(definition["outputs"])
    return (f'"""Starting kernel for {definition["name"]}: the definition\'s reference, destination-passing.\n\n'
            "Correct from the first commit, so the first experiment has a measured parent. Replace it with a\n"
            'Triton kernel; declare tunables as `NAME = value  # autogk: tune [choices]`.\n"""\n'
            f"{ref.rstrip()}\n\n\n"
            f"def run({', '.join(ins + outs)}):\n"
            f"    result = _reference({', '.join(ins)})\n"
            "    if not isinstance(result, (tuple, list)):\n"
            "        result = (result,)\n"
            f"    for out, value in zip(({', '.join(outs)},), result):\n"
            "        out.copy_(value)\n")


def program_md(definition: dict[str, Any]) -> str:
    def spec(name: str, s: dict) -> str:
        shape = "scalar" if s.get("shape") is None else "[" + ", ".join(s["shape"]) + "]"
        desc = f": {s['description']}" if s.get("description") else ""
        return f"- `{name}` {shape} {s['dtype']}{desc}"
    axes = [f"- `{n}`: " + (f"const {a['value']}" if a.get("type") == "const" else "varies by workload")
            for n, a in definition["axes"].items()]
    ins, outs = list(definition["inputs"]), list(definition["outputs"])
    return "\n".join([
        f"# {definition['name']}: notes for agents", "",
        definition.get("description", ""), "",
        "## Contract",
        f"- `run({', '.join(ins + outs)})` writes the outputs in place and returns nothing.",
        "- Inputs:", *[spec(n, s) for n, s in definition["inputs"].items()],
        "- Outputs:", *[spec(n, s) for n, s in definition["outputs"].items()],
        "- Axes:", *axes, "",
        "## Numerical hazards", "- (fill in: accumulation precision, masking, padding values)", "",
        "## Rules",
        "- One change per experiment. Stay in Triton. No benchmark gaming: inputs are fresh every trial,",
        "  outputs are poisoned before each call and checked again after timing.", ""])


def default_workloads(definition: dict[str, Any]) -> list[dict[str, Any]]:
    var = [n for n, a in definition["axes"].items() if a.get("type") != "const"]
    rng_ns = uuid.UUID("6f1e2c1a-0d1b-4a3e-9a57-2c7d7a0c4b11")
    out = []
    for v in DEFAULT_VAR_VALUES:
        axes = {n: v for n in var}
        out.append({"uuid": str(uuid.uuid5(rng_ns, f"{definition['name']}:{v}")), "axes": axes,
                    "inputs": {n: {"type": "random"} for n, s in definition["inputs"].items()
                               if s.get("shape") is not None}})
        if not var:
            break
    return out


def read_workloads(path: Path, definition: dict[str, Any], blobs_dir: Path | None = None,
                   seen: dict[str, str] | None = None) -> tuple[list[dict[str, Any]], list[tuple[Path, str]]]:
    """Workload lines (for this definition) and the safetensors blobs they reference; `seen` (uuid -> where)
    carries the uuids of files read before this one, so a uuid is unique across all of them.

    A blob's path is looked up under blobs_dir (the dataset's root, or the folder holding the
    blobs themselves), then relative to the workloads file and each folder above it."""
    lines, blobs, seen = [], [], {} if seen is None else seen
    name = definition["name"]
    try:
        found = read_jsonl(path)
    except FileNotFoundError:
        raise AutogkError(f"{path} does not exist", "pass the path of a workloads .jsonl file") from None
    for i, obj in found:
        if obj.get("definition") not in (None, name):
            continue
        wl = obj.get("workload", obj)
        check_workload(wl, f"{path}:{i}", definition)
        check_unique(wl, f"{path}:{i}", seen)
        for inp, spec in wl.get("inputs", {}).items():
            if spec.get("type") == "safetensors":
                if not isinstance(spec.get("path"), str):
                    raise TargetError(f"{path}:{i}: input {inp} is a safetensors blob without a 'path'",
                                      'give it as {"type": "safetensors", "path": "blobs/x.safetensors", "tensor_key": ...}')
                rel = Path(spec["path"])
                tries = ([blobs_dir / rel, blobs_dir / rel.name] if blobs_dir else []) + \
                    [p / rel for p in (path.parent, *path.parents)]
                src = next((t for t in tries if t.is_file()), None)
                if src is None:
                    where = f"under --blobs {blobs_dir}" if blobs_dir else "beside the workloads file or above it"
                    raise TargetError(f"{path}:{i}: input {inp} reads the blob {spec['path']}, which was not found "
                                      f"{where}",
                                      "FlashInfer-Bench's flashinfer-trace dataset keeps blobs under "
                                      "blob/workloads/<op_type>/<definition>/<definition>_<uuid>.safetensors: pass "
                                      "the dataset's root as --blobs DIR")
                blobs.append((src, spec["path"]))
                spec["path"] = f"blobs/{Path(spec['path']).name}"
        lines.append(obj if "workload" in obj else {"definition": name, "workload": wl})
    if not lines:
        raise TargetError(f"{path} has no workloads for definition {name}",
                          "pass the workloads file that belongs to this definition")
    return lines, blobs


def fib_validate(definition: dict[str, Any], workloads: list[dict[str, Any]]) -> str:
    """Validate with flashinfer-bench's own models when it is installed; returns what was checked."""
    from autogk_git import fib
    return fib.validate(definition, workloads)


def read_kernel(kernel_file: Path, definition: dict[str, Any]) -> str:
    """The user's own kernel file, checked enough to be a starting point: Python with a `run` function."""
    import ast
    try:
        text = read_text(kernel_file, "--kernel")
    except FileNotFoundError:
        raise AutogkError(f"--kernel {kernel_file} does not exist",
                          "pass the path of your Triton kernel's .py file") from None
    try:
        tree = ast.parse(text, str(kernel_file))
    except SyntaxError as e:
        raise AutogkError(f"--kernel {kernel_file} is not valid Python (line {e.lineno}: {e.msg})",
                          "fix the file, or leave --kernel out to start from the definition's reference") from None
    if not any(isinstance(n, ast.FunctionDef) and n.name == "run" for n in tree.body):
        args = ", ".join([*definition["inputs"], *definition["outputs"]])
        raise AutogkError(f"--kernel {kernel_file} defines no top-level `run` function",
                          f"the benchmark calls run({args}), writing the outputs in place; add that entry point")
    return text


def next_steps(target: Target, kernel_src: str, cmd: str) -> list[str]:
    """What `iterate` needs before it can try anything: tunables, an API key, or a command agent."""
    from autogk_git import tunables
    iterate = f"{cmd} iterate --target {target.name}"
    if env.has_anthropic_api_key():
        return [f"next: {iterate}  (ANTHROPIC_API_KEY is set: Claude edits {target.rel}/kernel.py)"]
    try:  # as the tuner reads them: a declaration it cannot read stops it at its first proposal
        found = tunables.parse(kernel_src, strict=True, where=f"{target.rel}/kernel.py")
    except tunables.TunableError as e:
        return [f"the offline tuner would stop at once: {e.message}", f"next: {e.hint}, commit it, then: {iterate}"]
    if found:
        return [f"next: {iterate}  (the offline tuner tries the {len(found)} tunable(s) of kernel.py: "
                f"{', '.join(found)}; with ANTHROPIC_API_KEY set, Claude edits the kernel instead)"]
    return [f"the loop has nothing to try yet: {target.rel}/kernel.py declares no tunables and "
            "ANTHROPIC_API_KEY is not set. Next, one of:",
            f"next: write a Triton kernel in {target.rel}/kernel.py with lines like "
            "`BLOCK = 128  # autogk: tune [64, 128, 256]`, commit it, then: " + iterate,
            f"next: export ANTHROPIC_API_KEY=...  then: {iterate}  (Claude writes the kernel)",
            f"next: {iterate} --agent command  (after setting [agent] command in .autogk.toml, "
            "e.g. command = \"claude -p\", a coding CLI that edits the kernel)"]


@dataclass
class Source:
    """What a target is made from, checked: nothing is written yet."""

    name: str                                   # the target's name
    definition: dict[str, Any]
    bundled: Path | None                        # a bundled example's folder: kernel, program, generator
    workloads: tuple[list[dict[str, Any]], list[tuple[Path, str]]] | None  # lines and blobs; None: defaults
    definition_file: Path | None = None         # where the definition was read from, for errors


def load_definition(definition_file: Path) -> dict[str, Any]:
    """A FlashInfer-Bench definition file, checked; sampling definitions are refused (not judgeable)."""
    try:
        definition = json.loads(read_text(definition_file, "the definition"))
    except FileNotFoundError:
        raise AutogkError(f"{definition_file} does not exist", "pass the path of a definition JSON file") from None
    except (json.JSONDecodeError, RecursionError) as e:
        raise AutogkError(f"{definition_file} is not valid JSON: {e}", "pass a FlashInfer-Bench definition") from None
    check_definition(definition, str(definition_file))
    if is_sampling(definition):
        raise AutogkError(f"{definition['name']} is a sampling definition: its outputs are random draws, which autogk "
                          "cannot judge (a reference run twice disagrees with itself)",
                          "sampling is out of scope; pick a deterministic definition")
    return definition


def prepare(definition_file: Path | None, workloads_file: Path | None, example: str | None, name: str | None,
            say: Say, blobs_dir: Path | None = None, workload_set: str | None = None) -> Source:
    """Read and check the definition (or bundled example), the target name and the workloads with their
    blobs; workload_set names one of a bundled definition's workload sets (None: its default)."""
    if bool(definition_file) == bool(example):
        raise AutogkError("give exactly one of --definition FILE or --example NAME",
                          f"bundled examples: {', '.join(examples())}")
    if workload_set and workloads_file:
        raise AutogkError("give --workloads FILE or --workload-set NAME, not both",
                          "--workload-set picks one of a bundled target's own sets; --workloads is your file")
    src_dir, files = None, [workloads_file] if workloads_file else []
    if example:
        found = bundled(example)
        if found is None:
            raise AutogkError(f"no bundled example '{example}'", f"bundled examples: {', '.join(examples())}")
        src_dir, home = found
        definition_file = home / "definition.json"
        files = files or workload_set_files(home, example, workload_set)
    definition = load_definition(definition_file)
    found = bundled(definition["name"]) if src_dir is None else None
    if found is not None:
        # A definition autogk bundles: its generator (valid indices, packed caches), compare rules,
        # workloads and Triton starting kernel come with it, so no user code is needed.
        src_dir, home = found
        what = "bundled target" if src_dir == home else f"variant of the bundled target {src_dir.name}"
        say(f"{definition['name']} is a {what}: using its input generator, compare rules, starting kernel"
            + ("" if workloads_file else f" and workloads (set '{workload_set or DEFAULT_SET}')"))
        files = files or workload_set_files(home, definition["name"], workload_set)
    elif src_dir is None and workload_set:
        raise AutogkError(f"--workload-set {workload_set}: {definition['name']} is not a bundled target, so it has no "
                          "workload sets", "pass your workloads as --workloads FILE (without it: 3 made-up ones)")
    tname = name or definition["name"]
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", tname):
        raise AutogkError(f"target name '{tname}' has characters git refs cannot carry", "pass --name NAME")
    read = read_workload_files(files, definition, blobs_dir) if files else None
    return Source(tname, definition, src_dir, read, definition_file)


def cpu_max_numel(top: Path | None) -> int:
    """[bench] cpu_max_numel of the project at top (its default before one exists), as reference_timeout."""
    if top is not None and (top / config_mod.CONFIG_NAME).exists():
        return config_mod.load(top).bench.cpu_max_numel
    return config_mod.parse({}).bench.cpu_max_numel


def reference_timeout(top: Path | None) -> float:
    """[bench] reference_timeout_s of the project at top (its default, with environment overrides, before one exists)."""
    if top is not None and (top / config_mod.CONFIG_NAME).exists():
        return config_mod.load(top).bench.reference_timeout_s
    return config_mod.parse({}).bench.reference_timeout_s


def needs_data(definition: dict[str, Any], workloads: list[dict[str, Any]], generator: str | None) -> bool:
    """Some integer input is random in some workload and no generator makes it (as Target.inputs_needing_data)."""
    from autogk_git.project import INT_DTYPES
    if generator:
        return False
    return any(spec.get("shape") is not None and spec.get("dtype") in INT_DTYPES
               and any(w.get("inputs", {}).get(n, {}).get("type", "random") == "random" for w in workloads)
               for n, spec in definition["inputs"].items())


@dataclass
class Contents:
    """A target folder's contents, ready to write."""

    files: dict[str, str]                       # file name in the folder -> text
    blobs: list[tuple[Path, str]]               # (source file, path a workload names) copied to blobs/
    workloads: list[dict[str, Any]]             # the workload objects, for flashinfer-bench's check


def target_files(source: Source, target: Target, kernel_file: Path | None, say: Say) -> Contents:
    """The target folder's files, from the source (a bundled example's, the user's kernel, or made here)."""
    definition, src_dir = source.definition, source.bundled
    if source.workloads is not None:
        wl_lines, blobs = source.workloads
    else:
        wl_lines = [{"definition": definition["name"], "solution": None, "workload": w, "evaluation": None}
                    for w in default_workloads(definition)]
        blobs = []
        say(f"no --workloads given: wrote {len(wl_lines)} workloads with the variable axes at "
            f"{', '.join(map(str, DEFAULT_VAR_VALUES))}; edit {target.dir / 'workloads.jsonl'} to match your shapes")
    files = {
        "definition.json": json.dumps(definition, indent=2) + "\n",
        "workloads.jsonl": "".join(json.dumps(line) + "\n" for line in wl_lines),
        "kernel.py": (read_kernel(kernel_file, definition) if kernel_file
                      else (src_dir / "kernel.py").read_text() if src_dir else starting_kernel(definition)),
        "program.md": (src_dir / "program.md").read_text() if src_dir and (src_dir / "program.md").exists()
        else program_md(definition),
    }
    for extra in ("inputs.py", FAST_REFERENCE):  # the generator and compare rules; the fast reference
        if src_dir and (src_dir / extra).exists():
            files[extra] = (src_dir / extra).read_text()
    return Contents(files, blobs, [line["workload"] for line in wl_lines])


def write_target(target: Target, definition: dict[str, Any], contents: Contents, say: Say) -> list[str]:
    """Write the target's folder (refusing to overwrite), after flashinfer-bench's own check; the paths
    written, relative to the repository root."""
    tdir, files, blobs = target.dir, contents.files, contents.blobs
    clash = [str(tdir / f) for f in files if (tdir / f).exists()]
    if clash:
        raise AutogkError(f"refusing to overwrite existing files: {', '.join(clash)}",
                          "move them away, or pass --name to create the target under another name")
    say(fib_validate(definition, contents.workloads))
    tdir.mkdir(parents=True, exist_ok=True)
    for f, text in files.items():
        (tdir / f).write_text(text)
    for src, _ in blobs:
        (tdir / "blobs").mkdir(exist_ok=True)
        shutil.copyfile(src, tdir / "blobs" / src.name)
    return [target.file_rel(f) for f in files] + [target.file_rel(f"blobs/{src.name}") for src, _ in blobs]


def write_project_files(top: Path, trunk: str) -> list[str]:
    """`.autogk.toml` when the repository has none, and `mlruns/` ignored; the paths written."""
    written = []
    cfg_path = top / config_mod.CONFIG_NAME
    if not cfg_path.exists():
        cfg_path.write_text(config_mod.render_default(trunk, ""))
        written.append(config_mod.CONFIG_NAME)
    gi = top / ".gitignore"
    existing = gi.read_text() if gi.exists() else ""
    if "mlruns/" not in existing:
        gi.write_text(existing + ("" if existing.endswith("\n") or not existing else "\n") + "# autogk's MLflow store\nmlruns/\n")
        written.append(".gitignore")
    return written
