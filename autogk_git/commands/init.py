"""`autogk init`: make a repository an autogk project and add a target, scaffolded from a FlashInfer-Bench
definition (or a bundled example) by scaffold.py, committed, and its starting kernel checked."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from autogk_git import scaffold
from autogk_git.errors import AutogkError
from autogk_git.git import hooks as hooks_mod
from autogk_git.git import commits, index, repo
from autogk_git.git.run import identity_env
from autogk_git.invocation import command_name
from autogk_git.loop.check import check_kernel, size_lines
from autogk_git.project import Project, input_data_message, new_target
from autogk_git.record import refs, sharing


def do_init(path: Path, definition_file: Path | None, workloads_file: Path | None, example: str | None,
            trunk: str | None, name: str | None, check: bool, say, blobs_dir: Path | None = None,
            kernel_file: Path | None = None) -> dict[str, Any]:
    # Every input is checked before anything is written: a bad file leaves no folder, repository or commit.
    source = scaffold.prepare(definition_file, workloads_file, example, name, say, blobs_dir)
    path.mkdir(parents=True, exist_ok=True)
    top = repo.toplevel(path)
    if top is None:
        commits.init(path, trunk or "main")
        top = path.resolve()
        say(f"initialized a git repository in {top}")
    target = new_target(top, source.name)
    contents = scaffold.target_files(source, target, kernel_file, say)
    written = scaffold.write_target(target, source.definition, contents, say)
    written += scaffold.write_project_files(top, trunk or repo.current_branch(top) or "main")
    project = Project(top)
    install_hooks(top, say)
    index.stage(top, *written)
    commits.commit(top, f"autogk: add target {source.name}", *written, env={"AUTOGK_LOOP": "1", **identity_env(top)})
    sha = repo.rev(top, "HEAD")
    say(f"committed {sha[:10]} on {repo.current_branch(top)}: target {source.name} in {target.rel}/")

    target = project.target(source.name)
    need = target.inputs_needing_data()
    info: dict[str, Any] = {"root": str(top), "target": source.name, "commit": sha, "files": written,
                            "needs_data": need}
    cmd = command_name()
    if need:
        say("NOTE: " + input_data_message(target, need) + f"\n  then check it with: {cmd} bench --target {target.name}")
        return info
    if check:
        info["baseline"] = check_kernel(project, target, "HEAD", say)
    info["next"] = size_lines(project, target) + scaffold.next_steps(target, contents.files["kernel.py"], cmd)
    for line in info["next"]:
        say(line)
    return info


def install_hooks(top: Path, say) -> None:
    """autogk's git hooks, and the notes and archive refs set to travel with fetch and push."""
    try:
        for line in hooks_mod.install(top, refs.NOTES_GLOB):
            say(line)
    except AutogkError as e:  # a tracked hooks folder: the target is still worth adding
        say(f"hooks not installed: {e.message}" + (f"\n  hint: {e.hint}" if e.hint else ""))
    for line in sharing.setup(top):
        say(line)


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
