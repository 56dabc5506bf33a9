"""Experiments as git keeps them: their refs, their numbers, the trunk, and their result and plan notes."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from autogk_git.errors import AutogkError
from autogk_git.git import repo
from autogk_git.project import Project
from autogk_git.record import notes, refs

Say = Callable[[str], None]


@dataclass
class Experiment:
    target: str
    number: int
    branch: str | None          # short branch name while open
    sha: str | None             # the branch tip (or kept/archive ref target)
    state: str                  # open | kept | archived | held (correct, untimed: refs/autogk/untimed)


def scan(project: Project, target: str) -> dict[int, Experiment]:
    """Every experiment of a target, from its refs (one git process)."""
    found: dict[int, Experiment] = {}
    pats = [f"{refs.BRANCH_PREFIX}{target}/", f"{refs.KEPT_PREFIX}{target}/", f"{refs.ARCHIVE_PREFIX}{target}/",
            f"{refs.UNTIMED_PREFIX}{target}/"]
    for name, sha in repo.for_each_ref(project.root, *pats):
        parsed = refs.ExperimentRef.parse(name)
        if not parsed:
            continue
        kind, ref = parsed
        exp = found.setdefault(ref.number, Experiment(target, ref.number, None, None, "open"))
        if kind == "branch":
            exp.branch = ref.branch
            exp.sha = exp.sha or sha
        else:
            exp.state = {"kept": "kept", "archive": "archived", "untimed": "held"}[kind]
            exp.sha = sha
    return found


def next_number(project: Project, target: str) -> int:
    nums = list(scan(project, target))
    wt_dir = project.state_dir / "worktrees"
    if wt_dir.is_dir():  # a worktree reserves its number even before its branch exists
        for p in wt_dir.iterdir():
            if p.name.startswith(target + "-") and p.name.rsplit("-", 1)[-1].isdigit():
                nums.append(int(p.name.rsplit("-", 1)[-1]))
    return max(nums, default=0) + 1


def ensure_trunk(project: Project, say: Say) -> str:
    """The trunk's tip; creates the trunk from HEAD when it does not exist yet."""
    sha = repo.rev(project.root, refs.branch(project.trunk))
    if sha:
        return sha
    head = repo.rev(project.root, "HEAD")
    if not head:
        raise AutogkError("the repository has no commits", "commit the project first: git add -A && git commit")
    repo.create_branch(project.root, project.trunk, head)
    say(f"created trunk branch '{project.trunk}' at {head[:10]}")
    return head


def load_result(project: Project, sha: str) -> dict[str, Any] | None:
    text = repo.read_note(project.root, refs.NOTES_RESULTS, sha)
    return notes.parse_result(text, sha) if text else None


def judged_here(project: Project, sha: str) -> bool:
    """Whether sha's result note was written by this clone (repo.own_notes), not fetched from a remote:
    only such a note may conclude an experiment (merge it, archive it) without benchmarking it again."""
    return sha in repo.own_noted(project.root, refs.NOTES_RESULTS)


# ------------------------------------------------------------------------------------------------
# Conclusion
# ------------------------------------------------------------------------------------------------


def write_plan(project: Project, sha: str, text: str) -> None:
    if text.strip():
        repo.write_note(project.root, refs.NOTES_PLANS, sha, text)


def results(project: Project, target: str, own_only: bool = False) -> list[dict[str, Any]]:
    """Result notes of a target's experiments, oldest first (bulk read). own_only: only the notes this
    clone wrote (repo.own_notes), for what the loop decides from them (the search's nodes, the tuner's
    tried configurations, the agents' history, the research triggers): a fetched note is shown (`log`,
    `report`), never acted on."""
    exps = scan(project, target)
    shas = [e.sha for e in exps.values() if e.sha]
    if own_only:
        mine = repo.own_noted(project.root, refs.NOTES_RESULTS)
        shas = [s for s in shas if s in mine]
    texts = repo.read_notes(project.root, refs.NOTES_RESULTS, shas)
    out = []
    for n in sorted(exps):
        e = exps[n]
        res = notes.parse_result(texts.get(e.sha, ""), e.sha) if e.sha else None
        if res:
            out.append(res)
    return out
