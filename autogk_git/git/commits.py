"""Making commits and repositories, and reading lines of history back (the log verbs)."""
from __future__ import annotations

from pathlib import Path

from autogk_git.git.run import git


def init(path: Path, branch: str) -> None:
    """A new repository at path whose first branch is `branch`."""
    git("init", "-q", "-b", branch, cwd=path)


def commit(cwd: Path, message: str, *paths: str, env: dict[str, str] | None = None, verify: bool = True,
           allow_empty: bool = False) -> None:
    """Commit the index (only paths, when given) with message. verify off skips the pre-commit hook;
    allow_empty makes a commit even when the index is HEAD's tree."""
    git("commit", "-q", *([] if verify else ["--no-verify"]), *(["--allow-empty"] if allow_empty else []), "-F", "-",
        *(["--", *paths] if paths else []), cwd=cwd, input=message, env=env)


def shared_clone(src: Path, dest: Path, cwd: Path) -> None:
    """A bare clone at dest that borrows src's objects (nothing copied) and takes no tags."""
    git("clone", "-q", "--bare", "--shared", "--no-tags", str(src), str(dest), cwd=cwd)


def message(root: Path, sha: str) -> str:
    """The commit's whole message, as written."""
    return git("log", "-1", "--format=%B", sha, cwd=root)


def first_parent_merges(root: Path, ref: str) -> list[list[str]]:
    """[merge sha, first parent, merged parent(s)...] for every merge on ref's first-parent line, newest first."""
    out = git("log", "--first-parent", "--merges", "--format=%H %P", ref, cwd=root)
    return [line.split() for line in out.splitlines()]


def first_parent_log(root: Path, rev: str, n: int) -> str:
    """The last n commits of rev's first-parent line: short sha, subject, body."""
    return git("log", "--first-parent", "-n", str(n), "--format=%h %s%n%b", rev, cwd=root)


def first_parent_line(root: Path, good: str, bad: str) -> list[str]:
    """The commits on bad's first-parent line after good, newest first."""
    return [c for c in git("rev-list", "--first-parent", f"{good}..{bad}", cwd=root).split() if c]


def oneline_range(cwd: Path, base: str, head: str, env: dict[str, str] | None = None) -> list[str]:
    """`%h %s` of the commits in base..head ([] when git cannot say)."""
    return git("log", "--format=%h %s", f"{base}..{head}", cwd=cwd, env=env, check=False).strip().splitlines()


def patches(root: Path, pairs: list[tuple[str, str]], path: str) -> str:
    """One `diff-tree -p` for many (commit, parent) pairs under path: each diff, empty or not, follows a
    line holding its commit, in input order."""
    return git("diff-tree", "--always", "--stdin", "-p", "--", path, cwd=root,
               input="".join(f"{c} {p}\n" for c, p in pairs))


def on_first_parent(root: Path, commit: str, tip: str) -> bool:
    """Whether commit is on tip's first-parent line (a trunk commit, not one merged into it)."""
    return commit in git("rev-list", "--first-parent", tip, cwd=root).split()


def merge_base(root: Path, a: str, b: str) -> str | None:
    """The best common ancestor of a and b; None when their histories are unrelated."""
    out = git("merge-base", a, b, cwd=root, check=False).strip()
    return out or None
