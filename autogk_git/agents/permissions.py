"""A coding CLI's own permission settings for one experiment, where the command is Claude Code or Codex.

These keep the CLI's tools to the worktree from the inside (the OS sandbox of agents/bwrap.py and
the undo of agents/confine.py hold whatever the CLI's settings let through):

- Claude Code (`claude`): `--permission-mode acceptEdits` (edits in its working folder, the
  worktree, are accepted without a prompt; `-p` has no one to ask) and `--settings FILE` whose
  permission rules allow reading, editing and running Python, and deny git (autogk commits the
  experiment), package installs and the web tools.
- Codex (`codex exec`): `--sandbox workspace-write` (its own sandbox: writes only in the working
  folder and temporary folders, and no network for the commands it runs) and
  `--skip-git-repo-check` (its git is the throwaway clone autogk points it at).

A flag the command already gives (`--permission-mode`, `--settings`, `--dangerously-skip-permissions`;
`--sandbox`/`-s`, `--full-auto`, `--dangerously-bypass-approvals-and-sandbox`) is the person's
choice and is kept; the note says so.
"""
from __future__ import annotations

import json
from pathlib import Path

CLAUDE_SETTINGS = {
    "permissions": {
        "defaultMode": "acceptEdits",
        "allow": ["Read", "Edit", "Write", "Glob", "Grep", "Bash(python:*)", "Bash(python3:*)"],
        "deny": ["Bash(git:*)", "Bash(pip:*)", "Bash(pip3:*)", "Bash(uv:*)", "Bash(conda:*)", "Bash(curl:*)",
                 "Bash(wget:*)", "Bash(ssh:*)", "WebFetch", "WebSearch"],
    },
}
CLAUDE_OWN = ("--permission-mode", "--dangerously-skip-permissions")
CODEX_OWN = ("--sandbox", "-s", "--full-auto", "--dangerously-bypass-approvals-and-sandbox", "--yolo")


def _given(args: list[str], flags: tuple[str, ...]) -> list[str]:
    return [a for a in args if a.split("=", 1)[0] in flags]


def for_cli(argv: list[str], scratch: Path) -> tuple[list[str], str]:
    """argv with the CLI's own permission flags added, and a line for the note ('' for other programs)."""
    name = Path(argv[0]).name if argv else ""
    if name == "claude":
        return _claude(argv, scratch)
    if name == "codex" and "exec" in argv[1:]:
        return _codex(argv)
    return argv, ""


def _claude(argv: list[str], scratch: Path) -> tuple[list[str], str]:
    added, kept = [], _given(argv[1:], CLAUDE_OWN + ("--settings",))
    if not _given(argv[1:], CLAUDE_OWN):
        added += ["--permission-mode", "acceptEdits"]
    if not _given(argv[1:], ("--settings",)):
        settings = scratch / "claude-settings.json"
        settings.write_text(json.dumps(CLAUDE_SETTINGS, indent=2) + "\n")
        added += ["--settings", str(settings)]
    return [argv[0], *added, *argv[1:]], _line("Claude Code", added, kept)


def _codex(argv: list[str]) -> tuple[list[str], str]:
    at = argv.index("exec") + 1
    added, kept = [], _given(argv[1:], CODEX_OWN + ("--skip-git-repo-check",))
    if not _given(argv[1:], CODEX_OWN):
        added += ["--sandbox", "workspace-write"]
    if "--skip-git-repo-check" not in argv:
        added.append("--skip-git-repo-check")
    return [*argv[:at], *added, *argv[at:]], _line("Codex", added, kept)


def _line(cli: str, added: list[str], kept: list[str]) -> str:
    parts = []
    if added:
        parts.append("added " + " ".join(added))
    if kept:
        parts.append("the command's own " + ", ".join(kept) + " kept")
    return f"{cli} permissions: " + "; ".join(parts)
