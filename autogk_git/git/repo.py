"""Repository operations autogk needs, each a thin, bulk-friendly wrapper over `git`."""
from __future__ import annotations

import subprocess
from pathlib import Path

from autogk_git.git.run import git, git_env, git_ok


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


def update_ref(root: Path, ref: str, sha: str, message: str = "autogk") -> None:
    git("update-ref", "-m", message, ref, sha, cwd=root)


def delete_ref(root: Path, ref: str) -> None:
    git("update-ref", "-d", ref, cwd=root)


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
    out = git("notes", "--ref", notes_ref, "list", cwd=root)
    pairs = (line.split() for line in out.splitlines() if line)
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


def write_note(root: Path, notes_ref: str, commit: str, text: str) -> None:
    git("notes", "--ref", notes_ref, "add", "-f", "-F", "-", commit, cwd=root, input=text)


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


def worktrees(root: Path) -> list[dict[str, str]]:
    """`git worktree list --porcelain` as dicts (worktree, HEAD, branch)."""
    out = git("worktree", "list", "--porcelain", cwd=root)
    items, cur = [], {}
    for line in out.splitlines():
        if not line:
            if cur:
                items.append(cur)
            cur = {}
            continue
        k, _, v = line.partition(" ")
        cur[k] = v
    if cur:
        items.append(cur)
    return items


def is_clean(root: Path, *paths: str) -> bool:
    out = git("status", "--porcelain", "--untracked-files=no", "--", *paths, cwd=root)
    return not out.strip()
