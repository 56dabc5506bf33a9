"""What a command agent could reach, compared before and after it runs, and put back.

A coding CLI runs as the user: it can write anywhere the user can. autogk cannot stop that, so it
bounds the damage and makes it visible:

- git commands the CLI runs go to a throwaway clone (`GIT_DIR` and `GIT_WORK_TREE` are set for it),
  so `git commit`, `git branch`, `git config` and hooks land there and are thrown away;
- before the run autogk records everything else it can cheaply compare: every ref of the real
  repository, its HEAD, its index, the main checkout's changed files, `.autogk.toml`, the git
  directory's `config`, `hooks/` (or `core.hooksPath`), `info/`, `shallow` and the object store's
  alternates, git's global and system config files, the refs of every remote that is a folder on
  this machine (a push is put back and listed, with the refs it made), hard links to every object
  file (one deleted is put back), and the `[agent] watch` paths;
- the agent's commits carry a committer address of their own (`marker`): a commit of the agent's on a
  branch checked out in the main checkout (the trunk) is undone with the checkout; one that cannot be
  told from a person's stops the loop with the command that undoes it;
- after the run each difference is undone where it can be (a copy of what the agent wrote is kept
  under `.git/autogk/confined/<NNNN>/`) and listed. Any difference outside the worktree makes the
  experiment invalid: it is recorded, never benchmarked, never kept.

Changes inside the worktree are judged by the caller (agents/command.py): the editable files are the
experiment, anything else there is discarded.
"""
from __future__ import annotations

import hashlib
import os
import secrets
import shutil
import stat
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from autogk_git.agents import bwrap
from autogk_git.errors import AutogkError
from autogk_git.git import commits, index, remotes, repo, settings, worktrees
from autogk_git.procs import pid_alive

MAX_SAVED = 8 << 20      # bytes of one file kept to put it back; a bigger one is compared by hash only
MAX_WALK = 20000         # files compared under one watched folder; past that the folder is skipped
KEPT_OBJECTS = "objects-kept-"  # under .git/autogk/confined/: hard links to the object files, one run's
MARKER_PREFIX, MARKER_DOMAIN = "agent-", "@autogk.invalid"  # the committer address of the agent's commits


def is_marker(email: str) -> bool:
    """Whether a committer address is the one a command agent's git commands carry (Snapshot.marker)."""
    return email.startswith(MARKER_PREFIX) and email.endswith(MARKER_DOMAIN)


@dataclass(frozen=True)
class Entry:
    """One path's state: kind ('file', 'link', 'dir'), permission bits, a digest, and its bytes."""

    kind: str
    mode: int
    digest: str
    data: bytes | None = None  # the file's bytes or the link's target; None when too big to keep

    def same(self, other: "Entry | None") -> bool:
        return other is not None and (self.kind, self.mode, self.digest) == (other.kind, other.mode, other.digest)


def entry(path: Path) -> Entry | None:
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    if stat.S_ISLNK(st.st_mode):
        target = os.readlink(path).encode(errors="surrogateescape")
        return Entry("link", 0, hashlib.sha256(target).hexdigest(), target)
    if stat.S_ISDIR(st.st_mode):
        return Entry("dir", stat.S_IMODE(st.st_mode), "")
    if not stat.S_ISREG(st.st_mode):
        return Entry("other", stat.S_IMODE(st.st_mode), str(st.st_ino))
    try:
        data = path.read_bytes() if st.st_size <= MAX_SAVED else None
    except OSError:
        return Entry("file", stat.S_IMODE(st.st_mode), f"unreadable:{st.st_size}:{st.st_mtime_ns}")
    digest = hashlib.sha256(data).hexdigest() if data is not None else f"big:{st.st_size}:{st.st_mtime_ns}"
    return Entry("file", stat.S_IMODE(st.st_mode), digest, data)


def walk(root: Path, skip: tuple[Path, ...] = ()) -> dict[Path, Entry]:
    """Every path under root (root included), not following links; folders in skip are left out."""
    out: dict[Path, Entry] = {}
    e = entry(root)
    if e is None:
        return out
    out[root] = e
    if e.kind != "dir":
        return out
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        dirnames[:] = [d for d in dirnames if here / d not in skip]
        for name in dirnames + filenames:
            p = here / name
            pe = entry(p)
            if pe is not None:
                out[p] = pe
            if len(out) > MAX_WALK:
                return {root: Entry("dir", e.mode, f"too-many-files:{len(out)}")}
    return out


def _put_back(path: Path, e: Entry) -> bool:
    """Make path what e recorded; False when e's bytes were not kept."""
    if e.kind == "dir":
        path.mkdir(parents=True, exist_ok=True)
        os.chmod(path, e.mode)
        return True
    if e.data is None:
        return False
    _remove(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if e.kind == "link":
        os.symlink(e.data.decode(errors="surrogateescape"), path)
    else:
        path.write_bytes(e.data)
        os.chmod(path, e.mode)
    return True


def _remove(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)
    elif os.path.lexists(path):
        path.unlink()


def _keep_copy(path: Path, backup: Path, label: str) -> str:
    """Copy what the agent left at path under backup; returns where (or '' when nothing to copy)."""
    if not os.path.lexists(path) or path.is_dir() and not path.is_symlink():
        return ""
    dest = backup / label.lstrip("/")
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        if path.is_symlink():
            dest.with_name(dest.name + ".symlink").write_text(os.readlink(path))
            return str(dest) + ".symlink"
        shutil.copy2(path, dest)
        return str(dest)
    except OSError:
        return ""


def restore_files(before: dict[Path, Entry], after: dict[Path, Entry], backup: Path,
                  label: dict[Path, str] | None = None) -> list[str]:
    """Undo every difference between two walks; one line per path."""
    def name(p: Path) -> str:  # under a labelled root: its short name, e.g. .git/hooks/pre-push
        for root, short in (label or {}).items():
            if p == root or root in p.parents:
                return short + str(p)[len(str(root)):]
        return str(p)

    changed = sorted({p for p in before.keys() | after.keys()
                      if not (before.get(p) and before[p].same(after.get(p)))}, key=lambda p: len(p.parts))
    why: dict[Path, str] = {}
    # Deepest first, take away what the agent left (a copy is kept), then shallowest first put back.
    for p in reversed(changed):
        b, a = before.get(p), after.get(p)
        if a is None or (b is not None and b.kind == a.kind == "dir"):
            continue
        copy = _keep_copy(p, backup, name(p))
        why[p] = f" (the agent's version: {copy})" if copy else ""
        _remove(p)
    lines: list[str] = []
    for p in changed:
        b, a = before.get(p), after.get(p)
        kept = why.get(p, "")
        if b is None:
            lines.append(f"{name(p)}: created; removed{kept}")
        elif b.kind == "dir":
            p.mkdir(parents=True, exist_ok=True)
            os.chmod(p, b.mode)
            if a is None or a.kind != "dir":
                lines.append(f"{name(p)}: folder {'deleted' if a is None else 'replaced'}; put back{kept}")
            elif a.mode != b.mode:
                lines.append(f"{name(p)}: permissions changed; put back")
        elif _put_back(p, b):
            lines.append(f"{name(p)}: {'deleted' if a is None else 'changed'}; put back{kept}")
        else:
            lines.append(f"{name(p)}: changed; NOT put back (over {MAX_SAVED >> 20} MiB){kept}")
    return lines


# ------------------------------------------------------------------------------------------------
# The repository
# ------------------------------------------------------------------------------------------------

def head_of(cwd: Path) -> str:
    """The ref HEAD points at, or the commit when it is detached."""
    return repo.head_ref(cwd) or repo.head_sha(cwd, check=False)


def status(cwd: Path) -> dict[str, str]:
    """{path: XY} of the checkout's changed and untracked files (ignored ones are not compared)."""
    out = index.changes_z(cwd, renames=False)
    return {e[3:]: e[:2] for e in out.split("\0") if len(e) > 3}


@dataclass
class Snapshot:
    common: Path                      # the repository's git directory
    main: Path | None                 # the main checkout, when it is not the agent's worktree
    worktree: Path
    refs: dict[str, str]
    main_head: str
    main_head_commit: str
    worktree_head: str
    index: str
    main_files: dict[Path, Entry]     # the main checkout's changed files, with their bytes
    files: dict[Path, Entry]          # git dir config, hooks, info; .autogk.toml; watched paths
    roots: list[Path] = field(default_factory=list)
    labels: dict[Path, str] = field(default_factory=dict)
    marker: str = ""                  # the committer address the agent's git commands carry
    remotes: dict[str, tuple[Path, dict[str, str]]] = field(default_factory=dict)  # local remotes' refs
    kept_objects: Path | None = None  # hard links to every object file, to put back one deleted
    stop: list[str] = field(default_factory=list)  # what only a person can undo: the loop stops


def _roots(main: Path | None, common: Path, worktree: Path, watch: list[str]) -> tuple[list[Path], dict[Path, str]]:
    hooks_dir = worktrees.hooks_dir(worktree).resolve()
    roots = [common / "config", common / "config.worktree", common / "hooks", common / "info", hooks_dir,
             common / "shallow", common / "objects" / "info" / "alternates",
             common / "objects" / "info" / "http-alternates"]
    # Git's global and system config reach every repository: a core.hooksPath there replaces autogk's hooks.
    config_files = settings.global_and_system_files()
    roots += config_files
    top = main or worktree
    roots.append(top / ".autogk.toml")
    if (worktree / ".git").is_file():  # a linked worktree's pointer to its git directory
        roots.append(worktree / ".git")
    home = Path(os.path.expanduser("~"))
    cli = [home / c for c in bwrap.CLI_CONFIG]
    roots += cli
    for w in watch:
        roots.append(Path(os.path.expanduser(w)).resolve())
    labels = {common / "config": ".git/config", common / "config.worktree": ".git/config.worktree",
              common / "hooks": ".git/hooks", common / "info": ".git/info", top / ".autogk.toml": ".autogk.toml",
              worktree / ".git": "the worktree's .git file", common / "shallow": ".git/shallow",
              common / "objects" / "info": ".git/objects/info",
              **{f: f"git config file {f}" for f in config_files},
              **{c: f"{c} (the coding CLI's own settings: what it runs when started)" for c in cli}}
    if hooks_dir != common / "hooks":
        labels[hooks_dir] = f"hooks ({hooks_dir})"
    return outermost(roots), labels


def outermost(paths: list[Path]) -> list[Path]:
    """The paths with any inside another one left out (it is walked with that one), in their order."""
    seen: list[Path] = []
    for r in paths:
        if not any(r == s or s in r.parents for s in seen):
            seen = [s for s in seen if r not in s.parents] + [r]
    return seen


def take(worktree: Path, watch: list[str]) -> Snapshot:
    """Record what the agent could change outside its worktree."""
    common = worktrees.common_dir(worktree)
    main = common.parent if common.name == ".git" else None
    if main is not None and main.resolve() == worktree.resolve():
        main = None  # the agent works in the main checkout itself (tests, a person's own run)
    roots, labels = _roots(main, common, worktree, watch)
    files: dict[Path, Entry] = {}
    for r in roots:
        files.update(walk(r))
    main_files: dict[Path, Entry] = {}
    if main is not None:
        for p in status(main):
            e = entry(main / p)
            if e is not None:
                main_files[main / p] = e
    return Snapshot(common=common, main=main, worktree=worktree, refs=repo.all_refs(worktree),
                    main_head=head_of(main) if main else "",
                    main_head_commit=repo.head_sha(main, check=False) if main else "",
                    worktree_head=head_of(worktree),
                    index=index.index_entries(main, check=False) if main else "",
                    main_files=main_files, files=files, roots=roots, labels=labels,
                    marker=f"{MARKER_PREFIX}{secrets.token_hex(6)}{MARKER_DOMAIN}",
                    remotes=remote_refs(worktree, common), kept_objects=keep_objects(common))


def check_and_undo(snap: Snapshot, backup: Path, own_branch: str) -> list[str]:
    """Compare with the snapshot, undo what differs, and return one line per difference.

    own_branch (refs/heads/...) is the experiment's branch: if the agent moved it, it is put back and
    the change stays in the worktree's files for the loop to judge and commit."""
    wt = snap.worktree
    # Git's own files first: the worktree's .git file, config (core.bare, core.worktree), and an
    # `info/exclude` of `*` that would hide new files from status. Then refs, then the checkouts,
    # which are compared against their HEADs.
    lines = restore_files(snap.files, _walk_all(snap.roots), backup, snap.labels)
    now = repo.all_refs(wt)
    checked_out = worktrees.checked_out(wt, besides=wt)
    for ref in sorted(snap.refs.keys() | now.keys()):
        old, new = snap.refs.get(ref), now.get(ref)
        if old == new:
            continue
        if old is None:
            repo.delete_ref(wt, ref, old=new)
            lines.append(f"ref {ref}: created at {new[:10]}; deleted (restore: git update-ref {ref} {new})")
        elif ref in checked_out and new is not None and snap.main is not None \
                and Path(checked_out[ref]).resolve() == snap.main.resolve():
            lines.append(_main_branch_moved(snap, ref, old, new))
        elif ref in checked_out and new is not None:
            # A branch checked out elsewhere moved: a person may have committed there. Leave it.
            lines.append(f"ref {ref}: moved {old[:10]} -> {new[:10]} while the agent ran; left as is "
                         f"(if the agent did it: git -C {checked_out[ref]} reset --keep {old})")
        else:
            repo.update_ref(wt, ref, old, message=None, old=new)
            what = "deleted" if new is None else f"moved to {new[:10]}"
            back = f"git update-ref -d {ref}" if new is None else f"git update-ref {ref} {new}"
            lines.append(f"ref {ref}: {what}; put back at {old[:10]}"
                         + (" (the agent's commit is undone; its files are judged as uncommitted changes)"
                            if ref == own_branch else f" (redo: {back})"))
    if head_of(wt) != snap.worktree_head:
        lines.append(f"the worktree's HEAD: switched to {head_of(wt)}; put back on {snap.worktree_head}")
        repo.point_head(wt, snap.worktree_head)
    index.unstage(wt)  # the worktree's index back to HEAD; the loop stages what it commits
    if snap.main is not None:
        lines += _main_checkout(snap, backup)
    lines += remotes_back(snap)
    lines += objects_back(wt, snap)
    return lines


def _main_branch_moved(snap: Snapshot, ref: str, old: str, new: str) -> str:
    """The branch the main checkout is on moved: undo the agent's commits, stop on anyone else's."""
    wt, main = snap.worktree, snap.main
    made = repo.committers(wt, old, new)
    if made and repo.is_ancestor(wt, old, new) and all(email == snap.marker for _, email in made):
        # Only the agent committed: the ref goes back, and _main_checkout then puts back the index and
        # the files (a person's unsaved edits it committed with -a included).
        repo.update_ref(wt, ref, old, message=None, old=new)
        return (f"ref {ref}: the agent committed on it in the main checkout ({len(made)} commit(s), "
                f"{new[:10]}); put back at {old[:10]} with the checkout (redo: git update-ref {ref} {new})")
    # Not only the agent's (a person's commit, or the agent hid its address): undoing could lose a
    # person's work, keeping it could judge every later experiment on what the agent wrote. Stop.
    snap.stop.append(f"{ref} (checked out in {main}) moved {old[:10]} -> {new[:10]} while the agent ran, "
                     f"and not only by the agent's commits: if they are not yours, undo them with "
                     f"`git -C {main} reset -q {old}` (what they changed stays as uncommitted edits, yours "
                     f"included: check with git -C {main} diff; see them first: git -C {main} log {old}..{new})")
    return f"ref {ref}: moved {old[:10]} -> {new[:10]} while the agent ran; the loop stops (see below)"


def _walk_all(roots: list[Path]) -> dict[Path, Entry]:
    out: dict[Path, Entry] = {}
    for r in roots:
        out.update(walk(r))
    return out


def _main_checkout(snap: Snapshot, backup: Path) -> list[str]:
    main = snap.main
    assert main is not None
    lines: list[str] = []
    head = head_of(main)
    if head != snap.main_head or repo.head_sha(main, check=False) != snap.main_head_commit:
        # Switching it back could overwrite a person's work: say so, compare nothing more there.
        return [f"the main checkout {main}: HEAD moved from {snap.main_head} to {head} while the agent ran; "
                f"left as is (check it: git -C {main} status)"]
    if index.index_entries(main, check=False) != snap.index:
        staged = index.staged_names(main)
        lines.append(f"the main checkout's index: changed ({', '.join(staged[:10]) or 'entries'}); put back")
        # Unstage what differs from the recorded index: entries recorded before go back as they were.
        index.read_tree(main)
        if snap.index:
            index.load_index_entries(main, snap.index)
    after = {main / p for p in status(main)} | set(snap.main_files)
    cur: dict[Path, Entry] = {}
    for p in after:
        e = entry(p)
        if e is not None:
            cur[p] = e
    rel = {p: f"{main.name}/{p.relative_to(main)}" for p in after}
    for p in sorted(after, key=lambda x: -len(x.parts)):
        b, a = snap.main_files.get(p), cur.get(p)
        if b is not None and b.same(a):
            continue
        copy = _keep_copy(p, backup, rel[p])
        kept = f" (the agent's version: {copy})" if copy else ""
        if b is not None:
            _put_back(p, b)
            lines.append(f"{rel[p]}: {'deleted' if a is None else 'changed'}; put back{kept}")
            continue
        if index.is_tracked(main, str(p.relative_to(main))):
            _remove(p)
            index.restore_from_index(main, str(p.relative_to(main)))
            lines.append(f"{rel[p]}: changed; put back as committed{kept}")
        else:
            _remove(p)
            lines.append(f"{rel[p]}: created; removed{kept}")
            _prune_empty(p.parent, main)
    return lines


def _prune_empty(d: Path, stop: Path) -> None:
    while d != stop and stop in d.parents:
        try:
            d.rmdir()
        except OSError:
            return
        d = d.parent


# ------------------------------------------------------------------------------------------------
# Beyond the git directory's files: local remotes and the object store
# ------------------------------------------------------------------------------------------------

def remote_refs(worktree: Path, common: Path) -> dict[str, tuple[Path, dict[str, str]]]:
    """{remote: (its folder, its refs)} of every remote that is a repository on this machine."""
    out = {}
    for name, path in remotes.local_paths(worktree).items():
        if path not in (common.resolve(), common.parent.resolve()):  # a remote that is this repository
            out[name] = (path, remotes.refs_in(path))
    return out


def remotes_back(snap: Snapshot) -> list[str]:
    """Put a local remote's refs back as they were (a push the agent made), one line per ref."""
    lines = []
    for name, (path, before) in snap.remotes.items():
        now, env = remotes.refs_in(path), remotes.git_dir_env(path)
        for ref in sorted(before.keys() | now.keys()):
            old, new = before.get(ref), now.get(ref)
            if old == new:
                continue
            where = f"remote {name} ({path}): {ref}"
            try:
                if old is None:
                    repo.delete_ref(path, ref, old=new, env=env)
                    lines.append(f"{where}: pushed at {new[:10]}; deleted (redo: git push {name} {new}:{ref})")
                else:
                    repo.update_ref(path, ref, old, message=None, old=new, env=env)
                    what = "deleted" if new is None else f"moved to {new[:10]}"
                    lines.append(f"{where}: {what}; put back at {old[:10]}")
            except AutogkError as e:
                lines.append(f"{where}: {old and old[:10]} -> {new and new[:10]}; NOT put back ({e.message[:200]})")
    return lines


def keep_objects(common: Path) -> Path | None:
    """Hard links to every loose object and pack file: one the agent deletes can be linked back.

    A link costs no copy (object files are never changed in place); None where links cannot be made."""
    base = common / "autogk" / "confined"
    base.mkdir(parents=True, exist_ok=True)
    for old in base.glob(KEPT_OBJECTS + "*"):  # left by a run that was killed before it cleaned up
        pid = old.name[len(KEPT_OBJECTS):].split("-")[0]
        if not pid.isdigit() or not pid_alive(int(pid)):
            shutil.rmtree(old, ignore_errors=True)
    keep = Path(tempfile.mkdtemp(prefix=f"{KEPT_OBJECTS}{os.getpid()}-", dir=base))
    try:
        for sub in (common / "objects").iterdir():
            if len(sub.name) != 2 and sub.name != "pack":
                continue
            (keep / sub.name).mkdir()
            for f in sub.iterdir():
                if f.is_file() and not f.name.startswith("tmp"):
                    os.link(f, keep / sub.name / f.name)
    except OSError:
        shutil.rmtree(keep, ignore_errors=True)
        return None
    return keep


def objects_back(cwd: Path, snap: Snapshot) -> list[str]:
    """Link back every object file the agent deleted while the store no longer holds its objects."""
    keep = snap.kept_objects
    if keep is None or not keep.exists():
        return ["the object store: not compared (hard links to its files could not be made, or were deleted)"]
    objects = snap.common / "objects"
    lines: list[str] = []
    try:
        gone = {d.name + f.name: (f, objects / d.name / f.name) for d in keep.iterdir() if d.name != "pack"
                for f in d.iterdir() if not (objects / d.name / f.name).exists()}
        # A loose object packed meanwhile (by git gc) is not gone: ask the store, not the folder.
        missing = repo.missing_objects(cwd, sorted(gone))
        for oid in missing:
            kept, dest = gone[oid]
            dest.parent.mkdir(exist_ok=True)
            os.link(kept, dest)
        if missing:
            lines.append(f"the object store: {len(missing)} object(s) deleted ({', '.join(o[:10] for o in missing[:5])}"
                         f"{', ...' if len(missing) > 5 else ''}); put back")
        for idx in sorted((keep / "pack").glob("*.idx")) if (keep / "pack").exists() else []:
            files = [f for f in (keep / "pack").glob(idx.stem + ".*") if not (objects / "pack" / f.name).exists()]
            if not files:
                continue
            whole_pack_gone = not (objects / "pack" / idx.name).exists()
            if whole_pack_gone and not repo.missing_objects(cwd, repo.pack_ids(cwd, idx)):
                continue  # repacked (git gc): its objects are all in the store still
            for f in files:
                os.link(f, objects / "pack" / f.name)
            lines.append(f"the object store: pack {idx.stem} ({', '.join(sorted(f.suffix for f in files))}) "
                         "deleted; put back")
    finally:
        shutil.rmtree(keep, ignore_errors=True)
    return lines


# ------------------------------------------------------------------------------------------------
# The throwaway clone the agent's git commands go to
# ------------------------------------------------------------------------------------------------

def sandbox_env(worktree: Path, where: Path) -> tuple[dict[str, str], Path]:
    """GIT_DIR/GIT_WORK_TREE for a throwaway clone that shares objects and sees the worktree's HEAD."""
    clone = where / "git"
    commits.shared_clone(worktrees.common_dir(worktree), clone, cwd=where)
    env = {"GIT_DIR": str(clone), "GIT_WORK_TREE": str(worktree)}
    settings.set_value(where, "core.bare", "false", env=env)
    head = head_of(worktree)
    sha = repo.head_sha(worktree)
    if head.startswith("refs/"):
        repo.update_ref(where, head, sha, message=None, env=env)
    repo.point_head(where, head if head.startswith("refs/") else sha, env=env)
    index.read_tree(where, env=env)
    index.refresh(where, env=env)
    return env, clone


# Config the agent could have written into its throwaway clone that makes a git command run a program:
# read outside the sandbox, each would run it as the user (a red-team plant, 2026-12-06: log.showSignature
# with its own gpg.program, through `git log` below). Overridden here: the command line's -c wins over
# every file's value, included ones too.
UNTRUSTED_CONFIG = {"log.showSignature": "false", "gpg.program": "false", "gpg.openpgp.program": "false",
                    "gpg.x509.program": "false", "gpg.ssh.program": "false", "core.fsmonitor": "false",
                    "core.pager": "cat", "diff.external": "", "core.hooksPath": "/dev/null"}


def untrusted(env: dict[str, str]) -> dict[str, str]:
    """env for a git command on a repository the agent could configure: UNTRUSTED_CONFIG on top, no
    global or system config."""
    out = dict(env, GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL="/dev/null",
               GIT_CONFIG_COUNT=str(len(UNTRUSTED_CONFIG)))
    for k, (key, value) in enumerate(UNTRUSTED_CONFIG.items()):
        out[f"GIT_CONFIG_KEY_{k}"], out[f"GIT_CONFIG_VALUE_{k}"] = key, value
    return out


def sandbox_commits(env: dict[str, str], where: Path, base: str) -> list[str]:
    """What the agent committed or created in the throwaway clone (it is thrown away with it)."""
    env = untrusted(env)
    lines = []
    head = repo.head_sha(where, env=env, check=False)
    if head and head != base:
        log = commits.oneline_range(where, base, head, env=env)
        lines.append("the agent made its own commit(s) (thrown away; the loop makes the experiment's commit): "
                     + ("; ".join(log[:5]) or head[:10]))
    return lines
