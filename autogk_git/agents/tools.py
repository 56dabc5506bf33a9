"""The tools an LLM agent may call, and the sandbox that keeps its writes to the editable files.

A tool never raises on bad input: a malformed call, a path outside the sandbox or a failed edit comes
back as a tool error the model can read and correct. Paths are repo-relative (as `git` shows them).
"""
from __future__ import annotations

import fnmatch
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from autogk_git.project import editable_match

MAX_READ = 60_000  # characters of one file returned to the model
MAX_WRITE = 200_000  # characters a written file may hold (a kernel is inlined into every later prompt)
MAX_PATH = 1024    # characters of one path argument; longer is a mistake (or an attack), never a crash


class ToolError(Exception):
    """A tool call the model must fix; its message goes back as an error tool_result."""


@dataclass
class Sandbox:
    """What an agent may read and write inside one checkout."""

    root: Path                      # the experiment's worktree (or the project root, read-only)
    target_rel: str                 # kernels/<target>
    editable: list[str]             # globs relative to the target
    docs: list[str] = field(default_factory=list)  # extra repo-relative globs readable
    writable: bool = True

    def _clean(self, path: Any) -> str:
        if not isinstance(path, str) or not path.strip():
            raise ToolError("'path' must be a non-empty string, e.g. "
                            f"'{self.target_rel}/kernel.py'")
        if len(path) > MAX_PATH or any(len(part) > 255 for part in path.split("/")):
            raise ToolError(f"path too long ({len(path)} characters; at most {MAX_PATH}, 255 per name): "
                            f"use the repo-relative path, e.g. '{self.target_rel}/kernel.py'")
        if any(ord(c) < 32 for c in path):
            raise ToolError("'path' must not contain control characters or NUL")
        p = path.strip().replace("\\", "/")
        if p.startswith("./"):
            p = p[2:]
        if os.path.isabs(p) or p.startswith("/"):
            raise ToolError(f"{path}: absolute paths are not allowed; use a repo-relative path "
                            f"like '{self.target_rel}/kernel.py'")
        if ".." in p.split("/"):
            raise ToolError(f"{path}: '..' is not allowed")
        if p.split("/")[0] == ".git":
            raise ToolError(f"{path}: the git directory is off limits")
        if "/" not in p and not any(fnmatch.fnmatch(p, g) for g in self.docs):
            # A bare file name most likely means the target's file.
            p = f"{self.target_rel}/{p}"
        return p

    def _resolve(self, rel: str, allowed: Callable[[str], bool]) -> Path:
        """The path after following every link, which must itself be allowed (and not under .git)."""
        full = self.root / rel
        real = Path(os.path.realpath(full))
        root = Path(os.path.realpath(self.root))
        if real != root and root not in real.parents:
            raise ToolError(f"{rel}: resolves outside the checkout (a symlink?); not allowed")
        real_rel = real.relative_to(root).as_posix()
        if real_rel.split("/")[0] == ".git" or not allowed(real_rel):
            raise ToolError(f"{rel}: a link to {real_rel}, which you may not "
                            f"{'change' if allowed == self.is_editable else 'read'}; not allowed")
        return full

    def readable(self, rel: str) -> bool:
        return rel.startswith(self.target_rel + "/") or any(fnmatch.fnmatch(rel, g) for g in self.docs)

    def is_editable(self, rel: str) -> bool:
        return editable_match(rel, self.target_rel, self.editable)

    def read(self, path: Any) -> str:
        rel = self._clean(path)
        if not self.readable(rel):
            raise ToolError(f"{rel}: not readable; you may read files under {self.target_rel}/"
                            + (f" and {', '.join(self.docs)}" if self.docs else ""))
        full = self._resolve(rel, self.readable)
        if not full.is_file():
            raise ToolError(f"{rel}: no such file; list files with list_files")
        size = full.stat().st_size
        with open(full, "rb") as f:  # no more than is returned: a data blob may be gigabytes
            data = f.read(MAX_READ * 4)
        if b"\0" in data[:8192]:
            raise ToolError(f"{rel}: a binary file ({size} bytes); read_file returns text")
        text = data.decode(errors="replace")
        if size > len(data) or len(text) > MAX_READ:
            text = text[:MAX_READ] + f"\n... [truncated: {size} bytes in all]"
        return text

    def list(self) -> list[str]:
        out = []
        for base, dirs, files in os.walk(self.root):
            dirs[:] = [d for d in dirs if d not in (".git", "__pycache__", "mlruns")]
            for f in files:
                rel = os.path.relpath(os.path.join(base, f), self.root).replace(os.sep, "/")
                if self.readable(rel) and not os.path.islink(os.path.join(base, f)):
                    out.append(rel + ("  (editable)" if self.is_editable(rel) else ""))
        return sorted(out)

    def _writable_path(self, path: Any) -> Path:
        rel = self._clean(path)
        if not self.writable:
            raise ToolError("this agent may not write files")
        if not self.is_editable(rel):
            raise ToolError(f"{rel}: not editable; you may change only "
                            f"{self.target_rel}/{{{','.join(self.editable)}}}")
        full = self._resolve(rel, self.is_editable)
        if full.is_symlink():
            raise ToolError(f"{rel}: is a symlink; not allowed")
        return full

    def write(self, path: Any, content: Any) -> str:
        full = self._writable_path(path)
        if not isinstance(content, str):
            raise ToolError("'content' must be a string: the whole new file")
        if len(content) > MAX_WRITE:  # a kernel that size would be inlined into every later prompt
            raise ToolError(f"'content' is {len(content)} characters; a file may hold at most {MAX_WRITE}")
        full.parent.mkdir(parents=True, exist_ok=True)
        full.write_text(content)
        return f"wrote {len(content)} characters to {full.relative_to(self.root).as_posix()}"

    def edit(self, path: Any, old: Any, new: Any) -> str:
        full = self._writable_path(path)
        if not isinstance(old, str) or not isinstance(new, str) or not old:
            raise ToolError("'old' (non-empty) and 'new' must be strings")
        if not full.is_file():
            raise ToolError(f"{path}: no such file; create it with write_file")
        text = full.read_text()
        n = text.count(old)
        if n != 1:
            raise ToolError(f"'old' occurs {n} times in {path}; it must occur exactly once "
                            "(include more surrounding lines)")
        text = text.replace(old, new, 1)
        if len(text) > MAX_WRITE:
            raise ToolError(f"the edit makes {path} {len(text)} characters; a file may hold at most {MAX_WRITE}")
        full.write_text(text)
        return f"edited {full.relative_to(self.root).as_posix()}"


# ------------------------------------------------------------------------------------------------
# Tool schemas (Messages API `tools`)
# ------------------------------------------------------------------------------------------------

def _schema(name: str, description: str, props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"name": name, "description": description,
            "input_schema": {"type": "object", "properties": props, "required": required}}


_PATH = {"type": "string", "description": "repo-relative path, e.g. kernels/<target>/kernel.py"}

READ_TOOLS = [
    _schema("list_files", "List the files you may read; editable ones are marked.", {}, []),
    _schema("read_file", "Read a file of the target (or an allowed doc).", {"path": _PATH}, ["path"]),
    _schema("history", "The experiments tried so far for this target: number, verdict, hypothesis, figures.",
            {"last": {"type": "integer", "description": "only the last N (default 30)"}}, []),
    _schema("read_artifact", "Read an analysis artifact: 'workloads' (the workload inspector's report) or "
            "'profile' (where the trunk kernel's time goes per workload, when a GPU profile was taken).",
            {"name": {"type": "string", "enum": ["workloads", "profile"]}}, ["name"]),
]
WRITE_TOOLS = [
    _schema("write_file", "Replace an editable file with new content.",
            {"path": _PATH, "content": {"type": "string"}}, ["path", "content"]),
    _schema("edit_file", "Replace one exact, unique snippet of an editable file.",
            {"path": _PATH, "old": {"type": "string"}, "new": {"type": "string"}}, ["path", "old", "new"]),
    _schema("run_check", "Run the quick correctness check (smallest and largest workloads) on the current "
            "files, on the configured backend. Slow: use it once your change is complete.", {}, []),
    _schema("finish", "End the experiment: your ONE change is in place. Autogk commits and benchmarks it.",
            {"hypothesis": {"type": "string", "description": "one line: what you changed and why it should be faster"},
             "rationale": {"type": "string", "description": "markdown: the reasoning, what you expect"},
             "nothing_left": {"type": "boolean", "description": "true (with no change) when nothing is worth trying"}},
            ["hypothesis"]),
]


def profile_text(history: list[dict[str, Any]], config: Any, fallback: Path | None = None,
                 axes: dict[str, dict] | None = None) -> str:
    """The `read_artifact` tool's 'profile': the newest Nsight Compute profile in the result notes
    (bench/ncu.py), else a torch-profiler report a person wrote (`fallback`, bench/profiler.py)."""
    from autogk_git.bench import ncu
    lines = ncu.view_lines(history, config, axes)
    if ncu.of(history) and not lines[0].startswith("no profile: "):
        return "\n".join(lines)
    if fallback is not None and fallback.exists():
        return fallback.read_text()
    raise ToolError(f"{lines[0]}; autogk takes one with --backend local where ncu is on PATH, or a person runs "
                    "`python -m autogk_git.bench.profiler` on a GPU machine")


def history_rows(history: list[dict[str, Any]], last: Any = 30) -> list[dict[str, Any]]:
    try:
        n = max(1, int(last))
    except (TypeError, ValueError, OverflowError):  # 1e999 in JSON is infinity
        n = 30
    rows = []
    for r in history[-n:]:
        v = r.get("verdict") or {}
        rows.append({"number": r.get("experiment"), "decision": v.get("decision"), "hypothesis": r.get("hypothesis"),
                     "correct": r.get("correct"), "figures": v.get("figures", ""),
                     "reason": (v.get("reason") or "")[:300], "tunables": r.get("tunables") or {}})
    return rows


def dispatch(handlers: dict[str, Callable[[dict[str, Any]], str]], name: str, args: Any) -> tuple[str, bool]:
    """Run one tool call; (content, is_error). Never raises for the model's mistakes."""
    if name not in handlers:
        return f"unknown tool '{name}'; available: {', '.join(sorted(handlers))}", True
    if not isinstance(args, dict):
        return f"tool input must be a JSON object, got {type(args).__name__}", True
    try:
        out = handlers[name](args)
    except ToolError as e:
        return f"error: {e}", True
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as e:
        return f"error: bad input for {name}: {type(e).__name__}: {str(e)[:300]}", True
    except OSError as e:  # a name too long, a folder where a file was: the model's to fix
        return f"error: {name} failed: {e.strerror or type(e).__name__}; check the path", True
    return out if isinstance(out, str) else json.dumps(out, indent=1, default=str), False


def check_worktree(config, target, seed: int = 0) -> dict[str, Any]:
    """The quick stage on the target's files as they are on disk (uncommitted), on the configured backend."""
    from autogk_git.bench.backends import get_backend
    from autogk_git.bench.job import quick_subset
    from autogk_git.bench.stages import run_stage
    from autogk_git.errors import AutogkError

    try:
        backend = get_backend(config.bench.backend, config)
        usable, skipped = backend.eligible(target.definition, target.workloads)
        if not usable:
            return {"correct": False, "error": "no workload can run on this backend", "skipped": len(skipped)}
        sources = {p.relative_to(target.dir).as_posix(): p.read_text(errors="replace")
                   for p in sorted(target.dir.rglob("*.py"))
                   if p.name != "inputs.py" and "__pycache__" not in p.parts}
        stage = run_stage(backend, target, "quick", {"candidate": sources}, quick_subset(target.definition, usable),
                          config, seed)
    except AutogkError as e:
        return {"correct": False, "error": e.message}
    wls = stage["workloads"].get("candidate", {})
    rows = {u[:8]: {k: w.get(k) for k in ("status", "message", "max_abs_err", "max_rel_err") if w.get(k) is not None}
            for u, w in wls.items()}
    summary = stage["summary"].get("candidate", {})
    return {"backend": backend.name, "correct": bool(summary.get("correct")), "workloads": rows,
            "timing": "none: correctness only" if not backend.timing else "not part of the quick check"}
