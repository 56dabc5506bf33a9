"""The target as the trunk holds it: what judges an experiment is read from its parent commit.

An experiment is a commit; its checkout (a person's worktree, a linked one, the loop's) is not evidence.
The definition, the workloads and their blobs, the generator and compare rules (`inputs.py`), the fast
reference (`reference.py`, bench/refproof.py) and `.autogk.toml` that judge it come from the commit it
branched from (the whole target folder is written out from it), read through git; and an experiment
whose diff against that parent touches anything but its editable files is invalid, however it was
committed (`--no-verify` skips the pre-commit guard; a side branch, a rebase or a hand-edited trailer
can move the parent off the trunk). The loop checks this before the benchmark (loop/experiment.assess)
and again before it applies a verdict (loop/experiment.conclude).

The parent's target folder is written out once per folder tree under the state directory: the
benchmark reads a folder (blobs by path), and the same trunk judges many experiments.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from autogk_git import config as config_mod
from autogk_git import env
from autogk_git.errors import ConfigError, TargetError
from autogk_git.git import commits, repo
from autogk_git.project import Project, Target, configured_target, target_rel
from autogk_git.record import kernels, refs

GPU_ENV = env.BENCH_GPU


@dataclass
class Judge:
    """What judges one experiment: its parent's target and config, and whether it stayed in its files."""

    parent: str
    target: Target                 # backed by the parent's folder, written out (see snapshot)
    config: config_mod.Config      # the parent's .autogk.toml, environment overrides applied
    offending: list[str] = field(default_factory=list)  # changed files outside the editable ones
    reason: str = ""               # why the experiment is invalid; "" when it is not
    against: str = ""              # the trunk commit it is measured against (see `baseline`)

    @property
    def invalid(self) -> bool:
        return bool(self.reason)


def config_at(project: Project, rev: str) -> config_mod.Config:
    """The project's config as commit rev holds it. The environment still overrides, and [bench] gpu
    stays the caller's: it picks the device (a parallel slot pins one), not how a kernel is judged."""
    text = repo.show_file(project.root, rev, config_mod.CONFIG_NAME)
    where = f"{rev[:10]}:{config_mod.CONFIG_NAME}"
    if text is None:
        raise ConfigError(f"commit {rev[:10]} has no {config_mod.CONFIG_NAME}: nothing to judge its experiments by",
                          f"branch experiments from the trunk ({project.trunk}), which has one")
    environ = dict(os.environ)
    if project.config.bench.gpu and GPU_ENV not in environ:
        environ[GPU_ENV] = project.config.bench.gpu
    return config_mod.loads(text, where, environ)


def snapshot(project: Project, rel: str, rev: str) -> Path:
    """The folder rel as commit rev holds it, written once under the state directory (by tree hash)."""
    tree = kernels.trees(project.root, [rev], rel).get(rev)
    if tree is None:
        raise TargetError(f"commit {rev[:10]} has no {rel}/: the experiment's target is not on its parent",
                          f"branch the experiment from the trunk: git checkout -b <branch> {project.trunk}")
    base = project.state_dir / "trunk-targets"
    dest = base / tree
    blobs = repo.tree_blobs(project.root, rev, rel)
    if dest.is_dir():
        if _holds(dest, blobs):
            return dest
        # Changed since it was written (by hand, or by a command agent run without a sandbox: a red-team
        # plant, 2026-12-06, rewrote its definition and its wrong kernel was kept): written again.
        shutil.rmtree(dest, ignore_errors=True)
    base.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{tree[:12]}-", dir=base))
    try:
        for path, data in blobs.items():
            out = tmp / path
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(data)
        try:
            tmp.rename(dest)  # atomic: a parallel slot sees the whole folder or none
        except OSError:
            if not dest.is_dir():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dest


def _holds(folder: Path, blobs: dict[str, bytes]) -> bool:
    """True when folder holds exactly these files with these bytes (no more, no links). Python's bytecode
    caches are left out of the comparison and removed: a planted one with the source's stamp would be
    loaded in its place."""
    for cache in [p for p in folder.rglob("__pycache__") if p.is_dir()]:
        shutil.rmtree(cache, ignore_errors=True)
    found = {p.relative_to(folder).as_posix(): p for p in folder.rglob("*") if p.is_file() or p.is_symlink()}
    if set(found) != set(blobs):
        return False
    return all(not p.is_symlink() and p.read_bytes() == blobs[rel] for rel, p in found.items())


def outside_files(project: Project, target: Target, parent: str, sha: str) -> list[str]:
    """The files sha changes against parent (or any ancestor) that are not the target's editable ones."""
    return [p for p in repo.changed_paths(project.root, parent, sha) if not target.is_editable(p)]


def baseline(project: Project, parent: str) -> str:
    """The trunk commit an experiment with this parent is measured against.

    Its parent, when the parent is a trunk commit (the tip, or a tip the trunk has moved past: a keep
    is then replayed onto the new tip and measured again, loop/replay.py). Otherwise (a tree
    experiment: a child of a kept, archived or held experiment, or of any other commit) the trunk tip
    itself: a node off the trunk is no yardstick, since a kernel slower than the trunk (archived for
    it, or planted slow) makes any child look faster than its parent."""
    tip = repo.rev(project.root, refs.branch(project.trunk))
    if tip is None or parent == tip or commits.on_first_parent(project.root, parent, tip):
        return parent
    return tip


def judge_for(project: Project, target_name: str, sha: str, parent: str | None, named: str | None = None) -> Judge:
    """Read what judges experiment sha from the trunk, and say whether the experiment is invalid.

    The target is the trunk commit it is measured against (`baseline`): its parent on the trunk, or
    the trunk tip for a tree experiment. Every file its path changes since it left the trunk (the
    merge base with the trunk tip) must be an editable one: a node off the trunk that changed
    inputs.py would otherwise hand its children a generator of its own. The trunk named by the
    caller's project is the one meant (the loop's config; a hook's benchmark is re-checked when
    `autogk iterate` concludes it, in the loop's project).

    parent is the commit's own first parent; named, its message's `Autogk-Parent:` trailer (the loop
    writes the parent there). A trailer that names another commit makes it invalid: text in a message
    does not choose the commit that judges it (an older trunk commit's lax generator, say)."""
    if not parent:
        raise TargetError(f"experiment {sha[:10]} has no parent commit to take its target from",
                          f"branch experiments from the trunk: git checkout -b autogk/{target_name}/NNNN-what {project.trunk}")
    against = baseline(project, parent)
    cfg = config_at(project, against)
    target = configured_target(cfg, target_name, snapshot(project, target_rel(cfg, target_name), against))
    judge = Judge(parent, target, cfg, against=against)
    tip = repo.rev(project.root, refs.branch(project.trunk))
    fork = commits.merge_base(project.root, sha, tip) if tip else None
    if named and named.strip() != parent:
        judge.reason = (f"its message's Autogk-Parent trailer names {named.strip()[:10]}, but its parent commit is "
                        f"{parent[:10]}: the commit it branched from judges it, not a line of its message. Commit "
                        f"the kernel change on a branch of {project.trunk} without that trailer")
        return judge
    if tip is None or fork is None:
        judge.reason = (f"its parent {parent[:10]} is not on the trunk ({project.trunk}) and shares no history with it: "
                        f"branch from {project.trunk} (or an experiment of it) and commit the kernel change alone")
        return judge
    judge.offending = outside_files(project, target, fork, sha)
    if judge.offending and against != parent:
        judge.reason = (f"its parent {parent[:10]} is not on the trunk ({project.trunk}), and its path from the trunk "
                        f"changes files outside {target.rel}/{{{','.join(target.editable)}}} ([agent] editable): "
                        f"{', '.join(judge.offending)}; the target that would judge it is not the trunk's. Branch "
                        f"from {project.trunk} or one of its experiments and commit the kernel change alone")
    elif judge.offending:
        judge.reason = (f"it changes files outside {target.rel}/{{{','.join(target.editable)}}} ([agent] editable): "
                        f"{', '.join(judge.offending)}; the definition, workloads, inputs.py, reference.py and .autogk.toml come "
                        f"from the trunk. Commit those on {project.trunk}, then the kernel change alone on a branch")
    return judge
