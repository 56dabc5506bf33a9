"""The command agent's OS sandbox: bubblewrap (`bwrap`) mount, pid and (optionally) network namespaces.

The agent's process sees this file system (later lines cover earlier ones):

    /                          read-only (the system, Python, the CLI itself)
    /dev, /proc                fresh (its own pid namespace: no other process is visible)
    /tmp                       empty and read-only (TMPDIR is in the run's scratch folder)
    $HOME                      an empty scratch folder, thrown away after the run: ~/.ssh, other
                               projects, tokens and caches in the home folder are not there
    software there             read-only: the top folder under $HOME of each PATH entry, the CLI
                               and Python (~/.local, ~/.nvm, ~/.pyenv), but never ~/.ssh, ~/.config...
    ~/.claude ~/.claude.json   read-write where they exist: a coding CLI's own login and state
    ~/.codex
    git's global config files  read-only (~/.gitconfig and the XDG one, where they are in $HOME)
    the main checkout          read-only
    its git directory          empty and read-only, except `objects/` (read-only), which the
                               throwaway clone borrows its objects from
    the experiment's worktree  read-write
    the run's scratch folder   read-write: the throwaway clone its git commands go to, the prompt,
                               the hypothesis file

So a write to the main checkout, to any ref, hook or config of the repository, to git's global
config or to a local remote fails inside the agent, and nothing there can be read back that the
worktree does not already hold. The agent's commits go to the throwaway clone (GIT_DIR, set by
agents/confine.py) and are thrown away: the loop commits the experiment itself. Every capability is
dropped, so a root agent cannot remount a folder read-write. The network is the host's unless
`[agent] network = false` (coding CLIs call their API over it).

Where bwrap is missing or cannot make namespaces, the caller falls back to the snapshot-and-undo of
agents/confine.py alone (which also runs, as the second line, inside the sandbox) and says why.
"""
from __future__ import annotations

import functools
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

PROBE_TIMEOUT_S = 30  # a busy machine; bwrap itself starts in milliseconds
CLI_STATE = (".claude", ".claude.json", ".codex")  # under $HOME: a coding CLI's login and settings
# Inside that state, what a CLI runs or obeys when started (hooks, commands, instructions): writable in the
# sandbox with the rest of the state, so compared before and after each run and put back (confine.py): a
# hook the agent planted there would run outside any sandbox the next time the person starts the CLI.
CLI_CONFIG = (".claude/settings.json", ".claude/settings.local.json", ".claude/CLAUDE.md", ".claude/hooks",
              ".claude/commands", ".claude/agents", ".codex/config.toml", ".codex/AGENTS.md")
SECRETS = (".ssh", ".gnupg", ".aws", ".azure", ".kube", ".docker", ".netrc", ".git-credentials", ".pypirc",
           ".config")  # never shown from $HOME, even when a PATH entry lies inside (.config holds gh, gcloud)
TMP = Path("/tmp")
INSTALL = "apt-get install bubblewrap"


@dataclass(frozen=True)
class Layout:
    """What the agent's process may see and write."""

    worktree: Path                 # read-write
    scratch: Path                  # read-write: the throwaway clone, prompt and hypothesis files
    common: Path                   # the repository's git directory: hidden but for objects/
    main: Path | None              # the main checkout: read-only
    home: Path                     # hidden (an empty folder), but for the CLI's state
    network: bool = True
    read_only: list[Path] = field(default_factory=list)  # shown read-only under the hidden folders
    tools: list[Path] = field(default_factory=list)      # the same, for software the agent runs (tools())


@functools.lru_cache(maxsize=1)
def probe() -> str:
    """'' where bwrap can make its namespaces on this machine, else why it cannot (one line)."""
    exe = shutil.which("bwrap")
    if exe is None:
        return f"bwrap is not installed ({INSTALL})"
    try:
        proc = subprocess.run([exe, *_base(network=True), "--", "true"], capture_output=True, text=True,
                              timeout=PROBE_TIMEOUT_S, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"bwrap could not start: {e}"
    if proc.returncode != 0:
        why = " ".join((proc.stderr or proc.stdout or f"exit code {proc.returncode}").split())[:200]
        # Typically unprivileged user namespaces are off (kernel.unprivileged_userns_clone=0,
        # or AppArmor's restrict_unprivileged_userns).
        return f"bwrap cannot create namespaces here: {why}"
    return ""


def choose(agent) -> str:
    """'bwrap' where the command agent gets the sandbox, else 'none: <why>' ([agent] sandbox and network)."""
    if agent.sandbox == "none":
        return 'none: [agent] sandbox = "none"'
    why = probe()
    return "bwrap" if not why else f"none: {why}"


def describe(agent) -> str:
    """The note's and doctor's line: `sandbox: bwrap (network on)` or `sandbox: none: <why>`."""
    box = choose(agent)
    return f"sandbox: {box}" + (f" (network {'on' if agent.network else 'off'})" if box == "bwrap" else "")


def _base(network: bool) -> list[str]:
    args = ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-pid", "--unshare-ipc",
            "--unshare-uts", "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    return args + ([] if network else ["--unshare-net"])


def tools(home: Path, path_env: str, programs: list[str]) -> list[Path]:
    """Folders under the hidden $HOME and /tmp that hold software the agent runs, shown read-only.

    Every PATH entry and the folders of the given programs (the CLI, Python, a script the command names
    by absolute path) count, resolved through
    links: one under $HOME shows its top folder there (~/.local, ~/.nvm, ~/.pyenv: an install keeps its
    parts together), one under /tmp only itself. Nothing else of $HOME is shown."""
    dirs = [Path(d) for d in path_env.split(":") if d.startswith("/")]
    for prog in programs:
        dirs += [Path(prog).parent, Path(prog).resolve().parent]
    out: list[Path] = []
    for d in dirs:
        for cand in (d, d.resolve()):
            if cand != home and home in cand.parents:
                shown = home / cand.relative_to(home).parts[0]
            elif TMP in cand.parents:
                shown = cand
            else:
                continue
            if shown.name not in SECRETS and shown.exists() and shown not in out:
                out.append(shown)
    return out


def command(layout: Layout, argv: list[str]) -> list[str]:
    """argv run inside the sandbox that layout describes."""
    exe = shutil.which("bwrap") or "bwrap"
    scratch_tmp = layout.scratch / "tmp"
    scratch_tmp.mkdir(exist_ok=True)
    args = [exe, *_base(layout.network), "--tmpfs", str(TMP)]
    home = layout.home
    if home.is_dir() and home != Path("/"):
        args += ["--tmpfs", str(home)]
        for name in CLI_STATE:
            p = home / name
            if p.exists():
                args += ["--bind", str(p), str(p)]
    for p in [*layout.read_only, *layout.tools]:
        if p.exists():
            args += ["--ro-bind", str(p), str(p)]
    if layout.main is not None:
        args += ["--ro-bind", str(layout.main), str(layout.main)]
    common, wt = layout.common, layout.worktree
    git_dir = ["--tmpfs", str(common), "--ro-bind", str(common / "objects"), str(common / "objects")]
    worktree = ["--bind", str(wt), str(wt)]
    # A later mount covers an earlier one: the worktree usually lives inside the git directory
    # (.git/autogk/worktrees/), but is the main checkout itself when the agent works there.
    args += worktree + git_dir if wt == common or wt in common.parents else git_dir + worktree
    args += ["--bind", str(layout.scratch), str(layout.scratch),
             # Last: the mount points above are made in them first. Submounts keep their own modes, so
             # /tmp is read-only but for the scratch folder (TMPDIR points there).
             "--remount-ro", str(common), "--remount-ro", str(TMP), "--setenv", "TMPDIR", str(scratch_tmp),
             "--chdir", str(wt)]
    return [*args, "--", *argv]
