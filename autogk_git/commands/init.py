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
from autogk_git.git import repo
from autogk_git.git.run import git, identity_env
from autogk_git.project import Project, Target, check_definition, check_workload, read_jsonl, read_text
from autogk_git.record import refs

DEFAULT_VAR_VALUES = (1, 16, 128)


def examples() -> list[str]:
    root = resources.files("autogk_git.examples")
    return sorted(p.name for p in root.iterdir() if p.is_dir() and (p / "definition.json").is_file())


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


def read_workloads(path: Path, definition: dict[str, Any]) -> tuple[list[dict[str, Any]], list[tuple[Path, str]]]:
    """Workload lines (for this definition) and the safetensors blobs they reference."""
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
                src = next((p / spec["path"] for p in (path.parent, *path.parents) if (p / spec["path"]).is_file()),
                           None)
                if src is None:
                    raise TargetError(f"{path}:{i}: input {inp} reads {spec['path']}, which was not found",
                                      "put the blob where the path points, relative to the workloads file "
                                      "or a folder above it")
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


def do_init(path: Path, definition_file: Path | None, workloads_file: Path | None, example: str | None,
            trunk: str | None, name: str | None, check: bool, say) -> dict[str, Any]:
    if bool(definition_file) == bool(example):
        raise AutogkError("give exactly one of --definition FILE or --example NAME",
                          f"bundled examples: {', '.join(examples())}")
    src_dir = None
    if example:
        if example not in examples():
            raise AutogkError(f"no bundled example '{example}'", f"bundled examples: {', '.join(examples())}")
        src_dir = Path(str(resources.files("autogk_git.examples").joinpath(example)))
        definition_file = src_dir / "definition.json"
        workloads_file = workloads_file or src_dir / "workloads.jsonl"
    try:
        definition = json.loads(read_text(definition_file, "the definition"))
    except FileNotFoundError:
        raise AutogkError(f"{definition_file} does not exist", "pass the path of a definition JSON file") from None
    except (json.JSONDecodeError, RecursionError) as e:
        raise AutogkError(f"{definition_file} is not valid JSON: {e}", "pass a FlashInfer-Bench definition") from None
    check_definition(definition, str(definition_file))
    tname = name or definition["name"]
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", tname):
        raise AutogkError(f"target name '{tname}' has characters git refs cannot carry", "pass --name NAME")
    # Every input is checked before anything is written: a bad file leaves no folder, repository or commit.
    read = read_workloads(workloads_file, definition) if workloads_file else None
    path.mkdir(parents=True, exist_ok=True)

    top = repo.toplevel(path)
    if top is None:
        git("init", "-q", "-b", trunk or "main", cwd=path)
        top = path.resolve()
        say(f"initialized a git repository in {top}")
    has_config = (top / config_mod.CONFIG_NAME).exists()
    targets = config_mod.load(top).project.targets if has_config else config_mod.SCHEMA["project"]["targets"].default
    target = Target(tname, top / targets / tname, targets_dir=targets)
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
        "kernel.py": (src_dir / "kernel.py").read_text() if src_dir else starting_kernel(definition),
        "program.md": (src_dir / "program.md").read_text() if src_dir and (src_dir / "program.md").exists()
        else program_md(definition),
    }
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
    git("add", "--", *written, cwd=top)
    git("commit", "-q", "-m", f"autogk: add target {tname}", "--", *written, cwd=top,
        env={"AUTOGK_LOOP": "1", **_identity(top)})
    sha = repo.rev(top, "HEAD")
    say(f"committed {sha[:10]} on {repo.current_branch(top)}: target {tname} in {target.rel}/")

    target = project.target(tname)
    need = target.inputs_needing_data()
    info: dict[str, Any] = {"root": str(top), "target": tname, "commit": sha, "files": written, "needs_data": need}
    if need:
        from autogk_git.project import input_data_message
        say("NOTE: " + input_data_message(target, need) + f"\n  then check it with: autogk bench --target {tname}")
        return info
    if check:
        from autogk_git.commands.bench import check_kernel
        summary = check_kernel(project, target, "HEAD", say)
        info["baseline"] = summary
    say(f"next: autogk iterate --target {tname}")
    return info


def _identity(root: Path) -> dict[str, str]:
    return identity_env(root)


@click.command("init", help="Make a repo an autogk project and add a kernel target.")
@click.argument("path", required=False, type=click.Path(file_okay=False, path_type=Path))
@click.option("--definition", "definition_file", type=click.Path(dir_okay=False, path_type=Path),
              help="a FlashInfer-Bench definition JSON file")
@click.option("--workloads", "workloads_file", type=click.Path(dir_okay=False, exists=True, path_type=Path),
              help="FlashInfer-Bench workload lines (JSONL) for that definition")
@click.option("--example", help="a bundled example target, e.g. rmsnorm_h4096")
@click.option("--trunk", help="trunk branch for a new project (default: the current branch)")
@click.option("--name", help="target name (default: the definition's name)")
@click.option("--check/--no-check", default=True, show_default=True,
              help="check the starting kernel's correctness after committing")
@click.option("--json", "as_json", is_flag=True, help="print a JSON summary")
def init(path, definition_file, workloads_file, example, trunk, name, check, as_json) -> int:
    say = (lambda s: click.echo(s, err=True)) if as_json else click.echo
    info = do_init(path or Path.cwd(), definition_file, workloads_file, example, trunk, name, check, say)
    if as_json:
        click.echo(json.dumps(info, indent=1))
    return 0
