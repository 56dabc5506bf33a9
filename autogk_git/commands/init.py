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
from autogk_git.loop.verdict import first_failure
from autogk_git.project import Project, input_data_message, new_target
from autogk_git.record import refs, sharing


def do_init(path: Path, definition_file: Path | None, workloads_file: Path | None, example: str | None,
            trunk: str | None, name: str | None, check: bool, say, blobs_dir: Path | None = None,
            kernel_file: Path | None = None, here: bool = False, workload_set: str | None = None,
            start: str = "starting") -> dict[str, Any]:
    # Every input is checked before anything is written; whatever is written is undone on any refusal
    # after that (an incorrect starting kernel included): a refused init leaves no folder, repository,
    # commit, hook or setting behind.
    if start == "best" and kernel_file:
        raise AutogkError("--start best and --kernel both say which kernel to start from",
                          "pass one: --kernel FILE (yours) or --start best (the bundled best known kernel)")
    source = scaffold.prepare(definition_file, workloads_file, example, name, say, blobs_dir, workload_set)
    best = scaffold.best_kernel(source) if start == "best" else None
    undo = Undo(path)
    try:
        return _init(path, source, trunk, check, say, kernel_file, here, undo, best)
    except BaseException:
        undo.run()
        raise


def where_to_add(path: Path, here: bool, say) -> Path | None:
    """The existing repository to add the target to (None: make `path` a repository of its own)."""
    resolved = path.resolve()
    top = repo.toplevel(resolved) if resolved.is_dir() else repo.toplevel(_existing_parent(resolved))
    if top is None:
        return None
    new_folder = not resolved.exists() or (resolved != top and resolved.is_dir() and not any(resolved.iterdir()))
    if here:
        return top
    if new_folder:
        say(f"{resolved} is inside the git repository {top}: making it a repository of its own "
            f"(to add the target to {top} instead, pass --here)")
        return None
    branch = repo.current_branch(top) or "HEAD"
    raise AutogkError(f"{resolved} is inside the existing git repository {top}: autogk would add the target under "
                      f"{top}/ and commit it on {branch}",
                      "to do that, pass --here; to make a new project instead, give a new folder: "
                      "autogk init my-kernels --definition FILE ...")


def _existing_parent(p: Path) -> Path:
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def refuse_package(tdir: Path) -> None:
    """The installed package's own folder (an editable install's examples) is never written into."""
    import autogk_git
    pkg = Path(autogk_git.__file__).resolve().parent
    if tdir.resolve() == pkg or pkg in tdir.resolve().parents:
        raise AutogkError(f"the target would go to {tdir}, inside autogk's own package ({pkg}): the bundled "
                          "examples are not a place for your targets",
                          "make a project of your own in a new folder: autogk init my-kernels --definition FILE ...")


def refuse_off_trunk(top: Path, trunk: str | None) -> None:
    """The target is committed on the project's trunk: refuse when another branch is checked out."""
    from autogk_git import config as config_mod
    cfg_trunk = config_mod.load(top).project.trunk if (top / config_mod.CONFIG_NAME).exists() else trunk
    here = repo.current_branch(top)
    if not cfg_trunk or here == cfg_trunk:
        return
    if repo.rev(top, refs.branch(cfg_trunk)) or trunk:
        raise AutogkError(f"the project's trunk is {cfg_trunk} but {here or 'a detached HEAD'} is checked out: "
                          "the target is committed on the trunk",
                          f"git switch {cfg_trunk}  (or: git switch -c {cfg_trunk}), then run this init again")


def _init(path: Path, source, trunk: str | None, check: bool, say, kernel_file: Path | None, here: bool,
          undo: "Undo", best: tuple[str, str] | None = None) -> dict[str, Any]:
    top = where_to_add(path, here, say)
    if top is not None:
        refuse_off_trunk(top, trunk)
    target = new_target(top or path.resolve(), source.name)
    refuse_package(target.dir)
    contents = scaffold.target_files(source, target, kernel_file, say)
    if best:
        contents.files["kernel.py"] = best[0]
        say(f"starting from the best known kernel of {source.bundled.name}: {best[1]}")
    say(check_reference(source, contents, top))
    if top is None:
        undo.made_folder(path)
        path.mkdir(parents=True, exist_ok=True)
        commits.init(path, trunk or "main")
        top = path.resolve()
        say(f"initialized a git repository in {top}")
    else:
        undo.existing_repo(top)
    undo.files_under(target.dir)
    written = scaffold.write_target(target, source.definition, contents, say)
    written += scaffold.write_project_files(top, trunk or repo.current_branch(top) or "main")
    project = Project(top)
    install_hooks(top, say)
    index.stage(top, *written)
    message = f"autogk: add target {source.name}" + (f" (kernel: the best known one)\n\n{best[1]}" if best else "")
    commits.commit(top, message, *written, env={"AUTOGK_LOOP": "1", **identity_env(top)})
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
        if first_failure(info["baseline"]):  # not "not checked" (every workload over the CPU's size limit)
            refuse_incorrect(info["baseline"], target, kernel_file)
    info["next"] = size_lines(project, target) + scaffold.next_steps(target, contents.files["kernel.py"], cmd)
    for line in info["next"]:
        say(line)
    return info


def refuse_incorrect(res: dict[str, Any], target, kernel_file: Path | None) -> None:
    """A starting kernel that fails its first check: every experiment would be judged against a broken parent."""
    fail = first_failure(res)
    why = f"{fail[0]} on workload {fail[1][:8]}: {fail[2][:300]}" if fail else (res.get("error") or "not correct")[:300]
    what = f"--kernel {kernel_file}" if kernel_file else f"the starting kernel ({target.rel}/kernel.py)"
    raise AutogkError(f"{what} is incorrect: {why}; nothing was written",
                      "fix the kernel (run it against the definition's reference), or leave --kernel out to start "
                      "from the reference")


def check_reference(source: scaffold.Source, contents: scaffold.Contents, top: Path | None) -> str:
    """The definition's reference run and checked on the smallest workload before anything is written."""
    import tempfile

    from autogk_git.bench import refcheck, refproof
    definition = source.definition
    where = str(source.definition_file) if source.definition_file else f"the definition of {source.name}"
    generator = contents.files.get("inputs.py")
    if scaffold.needs_data(definition, contents.workloads, generator):
        return "reference not checked ahead: some integer inputs need data (see below)"
    with tempfile.TemporaryDirectory(prefix="autogk-blobs-") as tmp:
        if contents.blobs:  # laid out as the target's folder will hold them
            (Path(tmp) / "blobs").mkdir()
            for src, _ in contents.blobs:
                (Path(tmp) / "blobs" / src.name).symlink_to(src.resolve())
        line = refcheck.check(definition, contents.workloads, where, scaffold.reference_timeout(top), generator, Path(tmp))
        if scaffold.FAST_REFERENCE in contents.files:  # proven before anything is written (bench/refproof.py)
            (Path(tmp) / scaffold.FAST_REFERENCE).write_text(contents.files[scaffold.FAST_REFERENCE])
            proof = refproof.check(definition, contents.workloads, Path(tmp), generator,
                                   where if where.endswith("definition.json") else "definition.json",
                                   scaffold.reference_timeout(top), scaffold.cpu_max_numel(top))
            line = f"{line}\n{proof}"
        return line


class Undo:
    """What init wrote, so a refusal takes it all back: the folder it made, or, in an existing repository,
    the branch tip, the index, .gitignore, the git config and hooks, and the target's folder."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.folder: Path | None = None
        self.top: Path | None = None
        self.saved: dict[str, Any] = {}
        self.target_dir: Path | None = None

    def made_folder(self, path: Path) -> None:
        p = path.resolve()
        if p.exists() and any(p.iterdir()):
            # An existing folder made a repository: its .git is ours, and the files init adds to it.
            self.saved["new_repo_in"] = p
            self.saved["files"] = {f: (p / f).read_bytes() if (p / f).exists() else None
                                   for f in (".gitignore", ".autogk.toml")}
            return
        while not p.parent.exists():
            p = p.parent
        self.folder = p if not p.exists() else path.resolve()
        self.saved["empty_existing"] = path.resolve().exists()

    def existing_repo(self, top: Path) -> None:
        from autogk_git.git import worktrees
        self.top = top
        common = worktrees.common_dir(top)
        hooks = worktrees.hooks_dir(top)
        self.saved.update(
            branch=repo.current_branch(top), head=repo.rev(top, "HEAD"), index_path=worktrees.git_path(top, "index"),
            config=(common / "config").read_bytes(), hooks_dir=hooks,
            hooks={p.name: p.read_bytes() for p in hooks.iterdir() if p.is_file()} if hooks.is_dir() else None,
            files={f: (top / f).read_bytes() if (top / f).exists() else None for f in (".gitignore", ".autogk.toml")},
            common=common, state=(common / "autogk").exists())
        ip = self.saved["index_path"]
        self.saved["index"] = ip.read_bytes() if ip.exists() else None  # what the person had staged, kept

    def files_under(self, tdir: Path) -> None:
        if not tdir.exists():
            p = tdir
            while not p.parent.exists():
                p = p.parent
            self.target_dir = p

    def run(self) -> None:
        import shutil
        if self.folder is not None:
            if self.saved.get("empty_existing"):
                for child in self.folder.iterdir():
                    shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
            else:
                shutil.rmtree(self.folder, ignore_errors=True)
            return
        if self.target_dir is not None:
            shutil.rmtree(self.target_dir, ignore_errors=True)
        top = self.saved.get("new_repo_in") or self.top
        if top is None:
            return
        s = self.saved
        for f, data in s["files"].items():
            if data is None:
                (top / f).unlink(missing_ok=True)
            else:
                (top / f).write_bytes(data)
        if "new_repo_in" in s:
            shutil.rmtree(top / ".git", ignore_errors=True)
            return
        (s["common"] / "config").write_bytes(s["config"])
        if not s["state"]:  # the baseline check's worktrees, snapshots and logs
            shutil.rmtree(s["common"] / "autogk", ignore_errors=True)
        hooks: Path = s["hooks_dir"]
        if s["hooks"] is None:
            shutil.rmtree(hooks, ignore_errors=True)
        elif hooks.is_dir():
            for p in hooks.iterdir():
                if p.is_file() and p.name not in s["hooks"]:
                    p.unlink()
            for n, data in s["hooks"].items():
                if (hooks / n).read_bytes() != data if (hooks / n).exists() else True:
                    (hooks / n).write_bytes(data)
        moved = repo.rev(top, "HEAD")
        if s["branch"] and moved != s["head"]:
            if s["head"]:
                repo.update_ref(top, refs.branch(s["branch"]), s["head"], "autogk init: refused, undone")
            else:
                repo.delete_ref(top, refs.branch(s["branch"]))
        if s["index"] is None:
            s["index_path"].unlink(missing_ok=True)
        else:
            s["index_path"].write_bytes(s["index"])


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
@click.option("--workload-set", "workload_set",
              help="which of a bundled target's workload sets to use (default: 'default'; the DSA targets also "
                   "have 'long', long contexts); several joined by commas ('default,long') are judged together")
@click.option("--kernel", "kernel_file", type=click.Path(dir_okay=False, exists=True, path_type=Path),
              help="start from your own Triton kernel (a .py file with run(inputs..., outputs...)) "
                   "instead of the definition's reference")
@click.option("--start", type=click.Choice(["starting", "best"]), default="starting", show_default=True,
              help="which bundled kernel to begin from: the starting kernel, or the best known one "
                   "(autogk_git/best_kernels/<target>/, with a note of the run that found it)")
@click.option("--trunk", help="trunk branch for a new project (default: the current branch)")
@click.option("--name", help="target name (default: the definition's name)")
@click.option("--here", is_flag=True, help="add the target to the git repository that holds PATH (default: "
              "a new folder inside a repository becomes a repository of its own)")
@click.option("--check/--no-check", default=True, show_default=True,
              help="check the starting kernel's correctness after committing")
@click.option("--json", "as_json", is_flag=True, help="print a JSON summary")
def init(path, definition_file, workloads_file, blobs_dir, example, workload_set, kernel_file, start, trunk, name,
         here, check, as_json) -> int:
    say = (lambda s: click.echo(s, err=True)) if as_json else click.echo
    info = do_init(path or Path.cwd(), definition_file, workloads_file, example, trunk, name, check, say,
                   blobs_dir=blobs_dir, kernel_file=kernel_file, here=here, workload_set=workload_set, start=start)
    if as_json:
        click.echo(json.dumps(info, indent=1))
    return 0
