"""Every ref name autogk uses, in one place.

    refs/heads/autogk/<target>/<NNNN>-<slug>   an experiment while it runs (branch)
    refs/autogk/kept/<target>/<NNNN>           a kept experiment's commit (also merged into trunk)
    refs/autogk/archive/<target>/<NNNN>        a reverted experiment's commit, kept with its notes
    refs/autogk/untimed/<target>/<NNNN>        a correct experiment an untimed backend (CPU) could not
                                               time: held, not merged, until a timed backend judges it
    refs/notes/autogk/results                  result notes (JSON after one human line)
    refs/notes/autogk/summaries                a compact summary beside each result note (record/summaries.py)
    refs/notes/autogk/plans                    plan notes (markdown)
    refs/notes/autogk/bisect                   measurements made by `autogk bisect`, reused by the next

An experiment number is reserved by its branch; it is used once it has a kept, archive or untimed ref.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

NOTES_RESULTS = "refs/notes/autogk/results"
NOTES_SUMMARIES = "refs/notes/autogk/summaries"
NOTES_PLANS = "refs/notes/autogk/plans"
NOTES_BISECT = "refs/notes/autogk/bisect"
NOTES_PREFIX = "refs/notes/autogk/"
NOTES_GLOB = NOTES_PREFIX + "*"
# What travels with fetch and push (record/sharing.py explains each).
NOTES_FETCH = "+refs/notes/autogk/*:refs/notes/remotes/{remote}/autogk/*"
REFS_FETCH = "refs/autogk/*:refs/autogk/*"
PUSH = ("HEAD", "refs/notes/autogk/*:refs/notes/autogk/*", "refs/autogk/*:refs/autogk/*")
BRANCH_PREFIX = "refs/heads/autogk/"
KEPT_PREFIX = "refs/autogk/kept/"
ARCHIVE_PREFIX = "refs/autogk/archive/"
UNTIMED_PREFIX = "refs/autogk/untimed/"
EXPERIMENTS_PREFIX = "refs/autogk/"  # the kept, archived and held experiments (KEPT_PREFIX, ...)


def branches_of(target: str, number: int) -> str:
    """The for-each-ref pattern of every branch of one experiment number."""
    return f"{BRANCH_PREFIX}{target}/{number:04d}-*"


def short_branch(ref: str) -> str:
    """refs/heads/NAME -> NAME."""
    return ref[len("refs/heads/"):] if ref.startswith("refs/heads/") else ref

_BRANCH_RE = re.compile(r"^refs/heads/autogk/(?P<target>[A-Za-z0-9_.-]+)/(?P<num>\d{4,})-(?P<slug>[a-z0-9-]*)$")
_DONE_RE = re.compile(r"^refs/autogk/(?P<kind>kept|archive|untimed)/(?P<target>[A-Za-z0-9_.-]+)/(?P<num>\d{4,})$")


def remote_notes_prefix(remote: str) -> str:
    """Where a remote's notes are fetched to, beside the local ones."""
    return f"refs/notes/remotes/{remote}/autogk/"


def branch(name: str) -> str:
    """The full ref of a local branch (the trunk, an experiment's branch)."""
    return f"refs/heads/{name}"


def slugify(text: str, limit: int = 40) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return slug[:limit].rstrip("-") or "change"


@dataclass(frozen=True)
class ExperimentRef:
    """Parses and formats the refs of one experiment."""

    target: str
    number: int
    slug: str = ""

    @property
    def name(self) -> str:
        return f"{self.number:04d}-{self.slug}" if self.slug else f"{self.number:04d}"

    @property
    def branch(self) -> str:
        """Short branch name, as `git checkout` takes it."""
        return f"autogk/{self.target}/{self.number:04d}-{self.slug}"

    @property
    def branch_ref(self) -> str:
        return "refs/heads/" + self.branch

    @property
    def kept_ref(self) -> str:
        return f"{KEPT_PREFIX}{self.target}/{self.number:04d}"

    @property
    def archive_ref(self) -> str:
        return f"{ARCHIVE_PREFIX}{self.target}/{self.number:04d}"

    @property
    def untimed_ref(self) -> str:
        return f"{UNTIMED_PREFIX}{self.target}/{self.number:04d}"

    @classmethod
    def parse(cls, ref: str) -> tuple[str, "ExperimentRef"] | None:
        """(kind, ref) for an autogk ref, kind in {'branch', 'kept', 'archive', 'untimed'}; None otherwise."""
        if not ref.startswith("refs/"):
            ref = "refs/heads/" + ref
        m = _BRANCH_RE.match(ref)
        if m:
            return "branch", cls(m["target"], int(m["num"]), m["slug"])
        m = _DONE_RE.match(ref)
        if m:
            return m["kind"], cls(m["target"], int(m["num"]))
        return None
