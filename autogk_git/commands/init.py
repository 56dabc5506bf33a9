"""`autogk init`: scaffold a target from a FlashInfer-Bench definition (or a bundled example), commit it."""
from __future__ import annotations

import json
import re
import shutil
import uuid
from importlib import resources
from pathlib import Path
from typing import Any

import click

from autogk_git import config as config_mod
from autogk_git.errors import AutogkError, TargetError
from autogk_git.git import hooks as hooks_mod
from autogk_git.git import commits, index, repo
from autogk_git.git.run import identity_env
from autogk_git.project import Project, Target, check_definition, check_workload, new_target, read_jsonl, read_text
from autogk_git.record import refs

DEFAULT_VAR_VALUES = (1, 16, 128)


def examples() -> list[str]:
    root = resources.files("autogk_git.examples")
    return sorted(p.name for p in root.iterdir() if p.is_dir() and (p / "definition.json").is_file())


def example_dir(name: str) -> Path:
    return Path(str(resources.files("autogk_git.examples").joinpath(name)))


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


def read_workloads(path: Path, definition: dict[str, Any], blobs_dir: Path | None = None
                   ) -> tuple[list[dict[str, Any]], list[tuple[Path, str]]]:
    """Workload lines (for this definition) and the safetensors blobs they reference.

    A blob's path is looked up under blobs_dir (the dataset's root, or the folder holding the
    blobs themselves), then relative to the workloads file and each folder above it."""
    lines, blobs = [], []
    name = definition["name"]
    if not path.is_file():
        raise AutogkError(f"{path} does not exist", "pass the path of a workloads .jsonl file")
    for i, obj in read_jsonl(path):
        if obj.get("definition") not in (None, name):
            continue
        wl = obj.get("workload", obj)
        check_workload(wl, f"{path}:{i}", definition)
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


def command_name() -> str:
    """How to call autogk so that a printed hint works as printed: `autogk` when PATH finds this very
    installation, else the full path of its script (setup.sh's .venv is not on PATH until activated)."""
    import sys
    here = Path(sys.executable).parent / "autogk"
    found = shutil.which("autogk")
    if not here.exists() or (found and Path(found).resolve() == here.resolve()):
        return "autogk"
    return str(here)  # absolute: the hints are followed after `cd` into the project


def read_kernel(kernel_file: Path, definition: dict[str, Any]) -> str:
    """The user's own kernel file, checked enough to be a starting point: Python with a `run` function."""
    import ast
    try:
        text = kernel_file.read_text()
    except OSError as e:
        raise AutogkError(f"cannot read --kernel {kernel_file}: {e.strerror}",
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
    import os
    from autogk_git import tunables
    found = tunables.parse(kernel_src)
    iterate = f"{cmd} iterate --target {target.name}"
    if os.environ.get("ANTHROPIC_API_KEY"):
        return [f"next: {iterate}  (ANTHROPIC_API_KEY is set: Claude edits {target.rel}/kernel.py)"]
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


def size_lines(project: Project, target: Target) -> list[str]:
    """Workloads the configured backend cannot run for size (the CPU interpreter's cpu_max_numel), said
    up front: a target none of whose workloads fit would otherwise look like a loop with nothing to do."""
    from autogk_git.bench.backends import get_backend
    from autogk_git.bench.job import numel
    try:
        backend = get_backend(project.config.bench.backend, project.config)
    except Exception:  # noqa: BLE001 - a backend that cannot be set up here is doctor's to report
        return []
    limit = getattr(backend, "max_numel", None)
    if limit is None:
        return []
    sizes = [numel(target.definition, w) for w in target.workloads]
    over = sorted(n for n in sizes if n > limit)
    if not over:
        return []
    fix = (f"run the loop on a GPU (`iterate --backend local`, or `--backend modal`), or raise the limit: "
           f"AUTOGK_BENCH_CPU_MAX_NUMEL={over[0]} or `cpu_max_numel = {over[0]}` under [bench] in .autogk.toml "
           "(the CPU interpreter is slow at that size)")
    if len(over) == len(sizes):
        return [f"warning: none of the {len(sizes)} workload(s) can run on the {backend.name} backend: each is over "
                f"[bench] cpu_max_numel ({over[0]} input elements or more > {limit}); {fix}"]
    return [f"note: {len(over)} of {len(sizes)} workload(s) are over [bench] cpu_max_numel ({over[0]} input "
            f"elements or more > {limit}) and are skipped on the {backend.name} backend; to check them too: {fix}"]


def do_init(path: Path, definition_file: Path | None, workloads_file: Path | None, example: str | None,
            trunk: str | None, name: str | None, check: bool, say, blobs_dir: Path | None = None,
            kernel_file: Path | None = None) -> dict[str, Any]:
    if bool(definition_file) == bool(example):
        raise AutogkError("give exactly one of --definition FILE or --example NAME",
                          f"bundled examples: {', '.join(examples())}")
    src_dir = None
    if example:
        if example not in examples():
            raise AutogkError(f"no bundled example '{example}'", f"bundled examples: {', '.join(examples())}")
        src_dir = example_dir(example)
        definition_file = src_dir / "definition.json"
        workloads_file = workloads_file or src_dir / "workloads.jsonl"
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
    if src_dir is None and definition["name"] in examples():
        # A definition autogk bundles: its generator (valid indices, packed caches), compare rules,
        # workloads and Triton starting kernel come with it, so no user code is needed.
        src_dir = example_dir(definition["name"])
        say(f"{definition['name']} is a bundled target: using its input generator, compare rules, starting kernel"
            + ("" if workloads_file else " and workloads"))
        workloads_file = workloads_file or src_dir / "workloads.jsonl"
    tname = name or definition["name"]
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", tname):
        raise AutogkError(f"target name '{tname}' has characters git refs cannot carry", "pass --name NAME")
    # Every input is checked before anything is written: a bad file leaves no folder, repository or commit.
    read = read_workloads(workloads_file, definition, blobs_dir) if workloads_file else None
    path.mkdir(parents=True, exist_ok=True)

    top = repo.toplevel(path)
    if top is None:
        commits.init(path, trunk or "main")
        top = path.resolve()
        say(f"initialized a git repository in {top}")
    target = new_target(top, tname)
    tdir = target.dir
    if read is not None:
        wl_lines, blobs = read
    else:
        wl_lines = [{"definition": definition["name"], "solution": None, "workload": w, "evaluation": None}
                    for w in default_workloads(definition)]
        blobs = []
        say(f"no --workloads given: wrote {len(wl_lines)} workloads with the variable axes at "
            f"{', '.join(map(str, DEFAULT_VAR_VALUES))}; edit {tdir / 'workloads.jsonl'} to match your shapes")
    files = {
        "definition.json": json.dumps(definition, indent=2) + "\n",
        "workloads.jsonl": "".join(json.dumps(line) + "\n" for line in wl_lines),
        "kernel.py": (read_kernel(kernel_file, definition) if kernel_file
                      else (src_dir / "kernel.py").read_text() if src_dir else starting_kernel(definition)),
        "program.md": (src_dir / "program.md").read_text() if src_dir and (src_dir / "program.md").exists()
        else program_md(definition),
    }
    if src_dir and (src_dir / "inputs.py").exists():
        files["inputs.py"] = (src_dir / "inputs.py").read_text()
    clash = [str(tdir / f) for f in files if (tdir / f).exists()]
    if clash:
        raise AutogkError(f"refusing to overwrite existing files: {', '.join(clash)}",
                          f"move them away, or pass --name to create the target under another name")
    checked = fib_validate(definition, [line["workload"] for line in wl_lines])
    say(checked)

    tdir.mkdir(parents=True, exist_ok=True)
    for f, text in files.items():
        (tdir / f).write_text(text)
    for src, _ in blobs:
        (tdir / "blobs").mkdir(exist_ok=True)
        shutil.copyfile(src, tdir / "blobs" / src.name)
    written = [target.file_rel(f) for f in files] + [target.file_rel(f"blobs/{src.name}") for src, _ in blobs]

    cfg_path = top / config_mod.CONFIG_NAME
    branch = repo.current_branch(top) or "main"
    if not cfg_path.exists():
        cfg_path.write_text(config_mod.render_default(trunk or branch, ""))
        written.append(config_mod.CONFIG_NAME)
    gi = top / ".gitignore"
    existing = gi.read_text() if gi.exists() else ""
    if "mlruns/" not in existing:
        gi.write_text(existing + ("" if existing.endswith("\n") or not existing else "\n") + "# autogk's MLflow store\nmlruns/\n")
        written.append(".gitignore")
    project = Project(top)
    try:
        for line in hooks_mod.install(top, refs.NOTES_GLOB):
            say(line)
    except AutogkError as e:  # a tracked hooks folder: the target is still worth adding
        say(f"hooks not installed: {e.message}" + (f"\n  hint: {e.hint}" if e.hint else ""))
    from autogk_git.record import sharing as remote_mod
    for line in remote_mod.setup(top):  # notes and archive refs travel with fetch/push
        say(line)
    index.stage(top, *written)
    commits.commit(top, f"autogk: add target {tname}", *written, env={"AUTOGK_LOOP": "1", **_identity(top)})
    sha = repo.rev(top, "HEAD")
    say(f"committed {sha[:10]} on {repo.current_branch(top)}: target {tname} in {target.rel}/")

    target = project.target(tname)
    need = target.inputs_needing_data()
    info: dict[str, Any] = {"root": str(top), "target": tname, "commit": sha, "files": written, "needs_data": need}
    cmd = command_name()
    if need:
        from autogk_git.project import input_data_message
        say("NOTE: " + input_data_message(target, need) + f"\n  then check it with: {cmd} bench --target {tname}")
        return info
    if check:
        from autogk_git.commands.bench import check_kernel
        summary = check_kernel(project, target, "HEAD", say)
        info["baseline"] = summary
    info["next"] = size_lines(project, target) + next_steps(target, files["kernel.py"], cmd)
    for line in info["next"]:
        say(line)
    return info


def _identity(root: Path) -> dict[str, str]:
    return identity_env(root)


@click.command("init", help="Make a repo an autogk project and add a kernel target.")
@click.argument("path", required=False, type=click.Path(file_okay=False, path_type=Path))
@click.option("--definition", "definition_file", type=click.Path(dir_okay=False, path_type=Path),
              help="a FlashInfer-Bench definition JSON file")
@click.option("--workloads", "workloads_file", type=click.Path(dir_okay=False, exists=True, path_type=Path),
              help="FlashInfer-Bench workload lines (JSONL) for that definition")
@click.option("--blobs", "blobs_dir", type=click.Path(file_okay=False, exists=True, path_type=Path),
              help="where the workloads' safetensors blobs live (a flashinfer-trace dataset's root)")
@click.option("--example", help="a bundled example target, e.g. rmsnorm_h4096")
@click.option("--kernel", "kernel_file", type=click.Path(dir_okay=False, exists=True, path_type=Path),
              help="start from your own Triton kernel (a .py file with run(inputs..., outputs...)) "
                   "instead of the definition's reference")
@click.option("--trunk", help="trunk branch for a new project (default: the current branch)")
@click.option("--name", help="target name (default: the definition's name)")
@click.option("--check/--no-check", default=True, show_default=True,
              help="check the starting kernel's correctness after committing")
@click.option("--json", "as_json", is_flag=True, help="print a JSON summary")
def init(path, definition_file, workloads_file, blobs_dir, example, kernel_file, trunk, name, check, as_json) -> int:
    say = (lambda s: click.echo(s, err=True)) if as_json else click.echo
    info = do_init(path or Path.cwd(), definition_file, workloads_file, example, trunk, name, check, say,
                   blobs_dir=blobs_dir, kernel_file=kernel_file)
    if as_json:
        click.echo(json.dumps(info, indent=1))
    return 0
