"""Repository operations autogk needs, each a thin, bulk-friendly wrapper over `git`."""
from __future__ import annotations

import contextlib
import fcntl
import subprocess
from pathlib import Path

from autogk_git.files import safe_repo_path
from autogk_git.git.run import git, git_env, git_ok, git_proc, identity_env
from autogk_git.git.worktrees import worktrees  # noqa: F401  (its home is worktrees.py)


def rev(root: Path, spec: str) -> str | None:
    """The commit sha of spec, or None when it does not resolve."""
    out = subprocess.run(["git", "rev-parse", "--verify", "--quiet", spec + "^{commit}"], cwd=str(root),
                         capture_output=True, text=True, env=git_env())
    return out.stdout.strip() or None


def current_branch(root: Path) -> str | None:
    out = subprocess.run(["git", "symbolic-ref", "--quiet", "--short", "HEAD"], cwd=str(root),
                         capture_output=True, text=True, env=git_env())
    return out.stdout.strip() or None


def toplevel(start: Path) -> Path | None:
    out = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=str(start), capture_output=True,
                         text=True, env=git_env())
    return Path(out.stdout.strip()) if out.returncode == 0 else None


def for_each_ref(root: Path, *patterns: str) -> list[tuple[str, str]]:
    """(refname, object sha) for refs under the given prefixes."""
    out = git("for-each-ref", "--format=%(refname) %(objectname)", *patterns, cwd=root)
    return [tuple(line.split(" ", 1)) for line in out.splitlines() if line]  # type: ignore[misc]


def all_refs(root: Path) -> dict[str, str]:
    """{refname: object sha} of every ref."""
    return dict(for_each_ref(root))


def reachable(root: Path, commit: str) -> bool:
    """True when some ref (a branch, a kept or archive ref) still reaches the commit."""
    out = git_proc("for-each-ref", "--count=1", "--contains", commit, "--format=%(refname)", cwd=root)
    return out.returncode == 0 and bool(out.stdout.strip())


def update_ref(root: Path, ref: str, sha: str, message: str | None = "autogk", old: str | None = None,
               env: dict[str, str] | None = None) -> None:
    """Point ref at sha; with old, only if it points there now (compare-and-swap). message None writes
    git's own reflog line."""
    git("update-ref", *(["-m", message] if message is not None else []), ref, sha, *([old] if old else []),
        cwd=root, env=env)


def delete_ref(root: Path, ref: str, old: str | None = None, env: dict[str, str] | None = None) -> None:
    """Delete ref; with old, only if it points there now."""
    git("update-ref", "-d", ref, *([old] if old else []), cwd=root, env=env)


def head_ref(cwd: Path | None, inherit: bool = False) -> str | None:
    """The ref HEAD points at (refs/heads/...), None when HEAD is detached. inherit: a hook asking about
    the repository that runs it (GIT_DIR as git set it)."""
    out = git_proc("symbolic-ref", "--quiet", "HEAD", cwd=cwd, inherit=inherit)
    return (out.stdout.strip() or None) if out.returncode == 0 else None


def head_sha(cwd: Path, env: dict[str, str] | None = None, check: bool = True) -> str:
    """`rev-parse HEAD`; raises GitError when HEAD has no commit, unless check is off."""
    return git("rev-parse", "HEAD", cwd=cwd, env=env, check=check).strip()


def object_id(root: Path, spec: str, check: bool = True) -> str:
    """The object id spec names (`COMMIT:path` for a file or folder at a commit); with check off, what
    git prints when it does not resolve."""
    return git("rev-parse", spec, cwd=root, check=check).strip()


def point_head(cwd: Path, head: str, env: dict[str, str] | None = None) -> None:
    """HEAD onto head: a ref (refs/...) makes it symbolic, a sha detaches it there."""
    if head.startswith("refs/"):
        git("symbolic-ref", "HEAD", head, cwd=cwd, env=env)
    else:
        git("update-ref", "--no-deref", "HEAD", head, cwd=cwd, env=env)


def create_branch(root: Path, name: str, start: str, track: bool = False) -> None:
    """A new branch at start; track: start is a remote-tracking branch it follows."""
    git("branch", *(["--quiet", "--track"] if track else []), name, start, cwd=root)


def rename_branch(cwd: Path, old: str, new: str) -> None:
    """Rename branch old to new (its reflog and any checkout of it follow)."""
    git("branch", "-m", old, new, cwd=cwd)


def tree_of(root: Path, commit: str) -> str:
    """The id of commit's tree."""
    return git("rev-parse", f"{commit}^{{tree}}", cwd=root).strip()


def object_kinds(root: Path, specs: list[str]) -> list[tuple[str, str]]:
    """(object id, type) for each spec, in order, in one process; a spec that names nothing gives
    (spec, 'missing')."""
    if not specs:
        return []
    out = git("cat-file", "--batch-check=%(objectname) %(objecttype)", cwd=root, input="\n".join(specs) + "\n")
    return [tuple(line.split(" ", 1)) if " " in line else (line, "") for line in out.splitlines()]  # type: ignore[misc]


def hash_blob(root: Path, text: str) -> str:
    """Store text as a blob; returns its id."""
    return git("hash-object", "-w", "--stdin", cwd=root, input=text).strip()


def cat_blobs(root: Path, shas: list[str]) -> dict[str, bytes]:
    """Read many objects in one process (`git cat-file --batch`)."""
    if not shas:
        return {}
    proc = subprocess.run(["git", "cat-file", "--batch"], cwd=str(root), input=("\n".join(shas) + "\n").encode(),
                          capture_output=True, env=git_env(), check=True)
    data, out, pos = proc.stdout, {}, 0
    for sha in shas:
        nl = data.index(b"\n", pos)
        header = data[pos:nl].decode().split()
        pos = nl + 1
        if len(header) < 3 or header[1] == "missing":
            continue
        size = int(header[2])
        out[sha] = data[pos:pos + size]
        pos += size + 1
    return out


def notes_map(root: Path, notes_ref: str) -> dict[str, str]:
    """{annotated commit sha: note blob sha} for one notes ref."""
    if not git_ok("rev-parse", "--verify", "--quiet", notes_ref, cwd=root):
        return {}
    return list_notes(root, notes_ref)


def list_notes(root: Path, notes_ref: str, check: bool = True) -> dict[str, str]:
    """notes_map for a caller that knows the ref exists (one process less); with check off an absent
    or broken ref gives {}."""
    out = git("notes", "--ref", notes_ref, "list", cwd=root, check=check)
    pairs = (line.split() for line in out.splitlines() if len(line.split()) == 2)
    return {commit: blob for blob, commit in pairs}


def read_notes(root: Path, notes_ref: str, commits: list[str] | None = None) -> dict[str, str]:
    """{commit: note text} for all (or the given) annotated commits, in two git processes."""
    m = notes_map(root, notes_ref)
    if commits is not None:
        m = {c: m[c] for c in commits if c in m}
    blobs = cat_blobs(root, list(set(m.values())))
    return {c: blobs[b].decode(errors="replace") for c, b in m.items() if b in blobs}


def read_note(root: Path, notes_ref: str, commit: str) -> str | None:
    out = subprocess.run(["git", "notes", "--ref", notes_ref, "show", commit], cwd=str(root),
                         capture_output=True, text=True, env=git_env())
    return out.stdout if out.returncode == 0 else None


@contextlib.contextmanager
def notes_lock(root: Path):
    """Hold this repository's notes lock (flock on autogk/notes.flock in the git directory: the file stays, the lock goes with its holder) while writing a notes ref.
    git updates a notes ref without a compare-and-swap: two writers at once (the loop, `sync`, a hand
    commit's background benchmark) each build on the ref they read, and the later one drops the other's
    note. Every note autogk writes goes through here, one writer at a time."""
    f = _own_file(root).with_name("notes.flock")  # not *.lock: no git lock is ever left behind
    f.parent.mkdir(parents=True, exist_ok=True)
    with open(f, "a") as fd:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)


def write_note(root: Path, notes_ref: str, commit: str, text: str) -> None:
    # A note is a commit on the notes ref: it needs an identity, which a new user may not have set yet.
    with notes_lock(root):
        git("notes", "--ref", notes_ref, "add", "-f", "-F", "-", commit, cwd=root, input=text, env=identity_env(root))
        blob = git("notes", "--ref", notes_ref, "list", commit, cwd=root).strip()
        mark_own(root, [blob])


def attach_note(root: Path, notes_ref: str, commit: str, blob: str) -> None:
    """Make the blob (exactly, no message clean-up) commit's note, replacing any."""
    with notes_lock(root):
        _attach(root, notes_ref, commit, blob)


def _attach(root: Path, notes_ref: str, commit: str, blob: str) -> None:
    git("notes", "--ref", notes_ref, "add", "-f", "-C", blob, commit, cwd=root, env=identity_env(root))
    mark_own(root, [blob])


# The notes this clone wrote, by blob id, in a file of the git directory that no fetch or push carries:
# a note fetched from a remote (a collaborator's, or one of ours that someone else then changed) is not
# in it. merge_notes never lets a remote replace or remove one of these.
OWN_NOTES = "autogk/own-notes"
_COMMON: dict[str, Path] = {}


def common_dir(root: Path) -> Path:
    """worktrees.common_dir, asked of git once per root and process."""
    key = str(root)
    if key not in _COMMON:
        from autogk_git.git.worktrees import common_dir as ask
        _COMMON[key] = ask(root)
    return _COMMON[key]


def _own_file(root: Path) -> Path:
    return common_dir(root) / OWN_NOTES


def mark_own(root: Path, blobs: list[str]) -> None:
    """Record note blobs as written by this clone (one line each; appends are whole lines)."""
    f = _own_file(root)
    f.parent.mkdir(parents=True, exist_ok=True)
    with open(f, "a") as out:
        out.write("".join(b + "\n" for b in blobs if b))


def own_notes(root: Path) -> set[str]:
    """The blob ids of the notes this clone wrote (mark_own)."""
    try:
        return set(_own_file(root).read_text().split())
    except FileNotFoundError:
        return set()


def own_noted(root: Path, notes_ref: str) -> set[str]:
    """The commits whose note on notes_ref this clone wrote (own_notes): what the loop, `pack`, `bisect`
    and the research plans may act on; a note fetched from a remote is shown, never acted on."""
    own = own_notes(root)
    return {c for c, blob in notes_map(root, notes_ref).items() if blob in own}


def remove_notes(root: Path, notes_ref: str, commits: list[str], env: dict[str, str] | None = None) -> None:
    """Drop the notes of commits (those without one are no error), in one process."""
    with notes_lock(root):
        git("notes", "--ref", notes_ref, "remove", "--ignore-missing", "--stdin", cwd=root,
            input="\n".join(commits) + "\n", env=env)


def merge_notes(root: Path, notes_ref: str, other: str, env: dict[str, str] | None = None) -> list[str]:
    """Merge the notes ref other into notes_ref: other's notes on commits notes_ref does not annotate come
    in, and other's updates of notes this clone only fetched (their author changed them); a note this
    clone wrote (own_notes) is never replaced or removed. git's `-s ours` settles only the notes both
    sides changed since their common history: where only the other side changed or removed one (a clone
    that fetched ours, edited a note and pushed), git takes the other side's, and a notes ref that is an
    ancestor of other's is fast-forwarded to it. Each such note of ours is put back. Returns the commits
    whose note was put back."""
    with notes_lock(root):
        before = notes_map(root, notes_ref)
        git("notes", "--ref", notes_ref, "merge", "--quiet", "-s", "ours", other, cwd=root, env=env)
        after = notes_map(root, notes_ref)
        own = own_notes(root)
        restored = [c for c, blob in before.items() if after.get(c) != blob and blob in own]
        for c in restored:
            _attach(root, notes_ref, c, before[c])
    return restored


def commit_info(root: Path, shas: list[str]) -> dict[str, dict[str, str]]:
    """{sha: {subject, body, author_date, parents}} for many commits in one process."""
    if not shas:
        return {}
    sep, end = "\x1f", "\x1e"
    out = git("log", "--no-walk=unsorted", f"--format=%H{sep}%P{sep}%aI{sep}%s{sep}%B{end}", "--stdin",
              cwd=root, input="\n".join(shas) + "\n")
    info = {}
    for rec in out.split(end):
        rec = rec.strip("\n")
        if not rec:
            continue
        sha, parents, date, subject, body = rec.split(sep, 4)
        info[sha] = {"subject": subject, "body": body, "date": date, "parents": parents}
    return info


def trailers(body: str) -> dict[str, str]:
    """`Key: value` trailers of a commit message's last paragraph."""
    paras = body.strip().split("\n\n")
    out = {}
    for line in paras[-1].splitlines() if paras else []:
        if ": " in line:
            k, v = line.split(": ", 1)
            if k.replace("-", "").isalnum():
                out[k] = v.strip()
    return out


def is_ancestor(root: Path, a: str, b: str) -> bool:
    return git_ok("merge-base", "--is-ancestor", a, b, cwd=root)


def diff(root: Path, a: str, b: str, *paths: str) -> str:
    return git("diff", a, b, "--", *paths, cwd=root)


def show_file(root: Path, rev_: str, path: str) -> str | None:
    out = subprocess.run(["git", "show", f"{rev_}:{path}"], cwd=str(root), capture_output=True, env=git_env())
    return out.stdout.decode(errors="replace") if out.returncode == 0 else None


def tree_blobs(root: Path, rev_: str, prefix: str) -> dict[str, bytes]:
    """{path relative to prefix: bytes} of the files under prefix at rev, read in two processes.

    A symlink comes back as the text of its target, never followed; a submodule is left out."""
    out = git("ls-tree", "-r", "-z", "--format=%(objecttype) %(objectname) %(path)", rev_, "--",
              prefix.rstrip("/") + "/", cwd=root)
    entries = [rec.split(" ", 2) for rec in out.split("\0") if rec]
    paths = [path for _, _, path in entries]
    # Trees made with git's plumbing can hold what a checkout refuses: a path through `..` (written out
    # by the judge or a snapshot, it lands outside the folder) and one name twice (git show reads one
    # entry, a dict keeps the other). Neither is a kernel anyone can check out; nothing of it is read.
    bad = sorted({p for p in paths if not safe_repo_path(p)} | {p for p in paths if paths.count(p) > 1})
    if bad:
        from autogk_git.errors import GitError
        raise GitError(f"{rev_[:10]}'s tree holds path(s) no checkout can have under {prefix}: "
                       f"{', '.join(bad[:5])}", "git fsck names the tree; no file of it is read")
    entries = [(sha, path) for kind, sha, path in entries if kind == "blob"]
    blobs = cat_blobs(root, [sha for sha, _ in entries])
    base = prefix.rstrip("/") + "/"
    return {path[len(base):]: blobs[sha] for sha, path in entries if sha in blobs}


def tree_files(root: Path, rev_: str, prefix: str) -> dict[str, str]:
    """{path relative to prefix: text} of the files under prefix at rev, read in two processes."""
    return {p: b.decode(errors="replace") for p, b in tree_blobs(root, rev_, prefix).items()}


def changed_files(root: Path, a: str, b: str) -> list[str]:
    out = git("diff", "--name-only", a, b, cwd=root)
    return [line for line in out.splitlines() if line]


def changed_paths(root: Path, a: str, b: str) -> list[str]:
    """Every path that differs between commits a and b, sorted: both sides of a rename (a renamed
    file is a deletion and an addition here), mode and type changes, whatever the user's diff config."""
    out = git("diff-tree", "-r", "-z", "--no-renames", "--name-only", "--no-commit-id", a, b, cwd=root)
    return sorted({p for p in out.split("\0") if p})


def is_clean(root: Path, *paths: str) -> bool:
    out = git("status", "--porcelain", "--untracked-files=no", "--", *paths, cwd=root)
    return not out.strip()


def committers(root: Path, old: str, new: str) -> list[tuple[str, str]]:
    """(sha, committer email) of each commit new reaches and old does not, newest first."""
    out = git("log", "--format=%H %ce", f"{old}..{new}", cwd=root, check=False)
    return [tuple(line.split(" ", 1)) for line in out.splitlines() if " " in line]  # type: ignore[misc]


def missing_objects(root: Path, ids: list[str]) -> list[str]:
    """The ids among ids that the object store no longer holds."""
    if not ids:
        return []
    out = git("cat-file", "--batch-check=%(objectname)", cwd=root, input="\n".join(ids) + "\n", check=False)
    return [line.split()[0] for line in out.splitlines() if line.endswith(" missing")]


def pack_ids(root: Path, idx: Path) -> list[str]:
    """The object ids a pack's index lists (read from the .idx file, which need not be in the store)."""
    out = git("show-index", cwd=root, input=idx.read_bytes(), check=False)
    return [line.split()[1] for line in out.splitlines() if len(line.split()) >= 2]
