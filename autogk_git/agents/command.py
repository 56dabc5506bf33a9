"""An external coding CLI as the agent: `claude -p`, `codex exec`, or any program that edits files.

autogk runs `[agent] command` in the experiment's worktree with a generated prompt, then keeps what
changed inside the target's editable files and undoes (with a message) everything else. It runs in
an OS sandbox where bwrap can make one (agents/bwrap.py: only the worktree writable, the repository's
git directory and $HOME hidden); Claude Code and Codex also get their own permission settings
(agents/permissions.py). Its git commands go to a throwaway clone; what it changes outside the
worktree is undone and makes the experiment invalid (agents/confine.py). The prompt is
passed as the last argument, or where the command says `{prompt}` (the text) or `{prompt_file}` (a file
holding it). Examples (see docs/agents.md):

    command = "claude -p --permission-mode acceptEdits"
    command = "codex exec --full-auto"
"""
from __future__ import annotations

import os
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from autogk_git import env as environment
from autogk_git.agents import bwrap, confine, permissions, prompts, pyenv, reaper
from autogk_git.agents.base import Context, Proposal
from autogk_git.errors import AgentError, ConfigError
from autogk_git.git import index, repo, settings

TAIL = 4000  # characters of the CLI's output kept in the plan note


def scripts(argv: list[str]) -> list[str]:
    """The files a command names by absolute path (a script handed to an interpreter: `python
    /abs/agent.py`): the sandbox shows their folders read-only, like the CLI's own, or a checkout under
    the hidden /tmp or $HOME could not run its own script."""
    return [a for a in argv[1:] if a.startswith("/") and Path(a).is_file()]


def changed_paths(worktree: Path) -> list[tuple[str, str]]:
    """(status, repo-relative path) of every change in the worktree, untracked files included."""
    out = index.changes_z(worktree)
    items, parts, i = [], out.split("\0"), 0
    while i < len(parts):
        entry = parts[i]
        i += 1
        if not entry:
            continue
        status, path = entry[:2], entry[3:]
        if status[0] in "RC":  # a rename carries its source as the next field
            items.append(("D ", parts[i]))
            i += 1
        items.append((status, path))
    return items


def undo(worktree: Path, paths: list[tuple[str, str]]) -> None:
    """Put the given paths back as the commit has them; delete the untracked ones."""
    # Untracked first: a symlink standing where a folder was would send the checkout through it.
    for s, p in sorted(paths, key=lambda sp: -sp[1].count("/")):
        if s == "??":
            full = worktree / p
            if full.is_symlink() or full.is_file():
                full.unlink()
    tracked = [p for s, p in paths if s != "??"]
    if tracked:
        for p in tracked:
            full = worktree / p
            if full.is_symlink() or full.is_dir():  # a kernel.py replaced by a link or a folder
                full.unlink() if full.is_symlink() else shutil.rmtree(full)
        index.restore_from_head(worktree, *tracked)
        index.unstage(worktree, *tracked)


def not_plain(worktree: Path, paths: list[tuple[str, str]]) -> list[tuple[tuple[str, str], str]]:
    """Editable paths that are not plain files, or whose permission bits differ from the commit's."""
    modes = {}
    for line in index.index_entries(worktree, *[p for _, p in paths]).split("\0"):
        if "\t" in line:
            meta, path = line.split("\t", 1)
            modes[path] = meta.split()[0]
    bad = []
    for sp in paths:
        full = worktree / sp[1]
        if full.is_symlink():
            bad.append((sp, f"{sp[1]} became a symbolic link to {os.readlink(full)}"))
        elif full.exists() and not full.is_file():
            bad.append((sp, f"{sp[1]} is not a plain file"))
        elif full.exists() and sp[1] in modes:
            exe = bool(full.stat().st_mode & 0o111)
            if exe != (modes[sp[1]] == "100755"):
                bad.append((sp, f"{sp[1]}: its mode changed ({modes[sp[1]]} -> {oct(full.stat().st_mode)[-6:]})"))
    return bad


def _program(name: str, cwd: Path, path: str | None) -> str:
    """The program's absolute path, found as exec would (PATH, or relative to cwd); FileNotFoundError if none."""
    found = shutil.which(name, path=path) if "/" not in name else \
        str(cwd / name) if os.access(cwd / name, os.X_OK) else None
    if found is None:
        raise FileNotFoundError(name)
    return found


class CommandAgent:
    name = "command"

    def __init__(self, config) -> None:
        self.config = config
        self._warned = False  # the no-sandbox warning, said once per run
        self.command = (config.agent.command or "").strip()
        if not self.command:
            raise ConfigError("the command agent needs a command to run",
                              'set [agent] command in .autogk.toml, e.g. command = "claude -p", '
                              "or AUTOGK_AGENT_COMMAND")

    def argv(self, prompt: str, prompt_file: Path) -> list[str]:
        args = shlex.split(self.command)
        if any("{prompt}" in a or "{prompt_file}" in a for a in args):
            return [a.replace("{prompt_file}", str(prompt_file)).replace("{prompt}", prompt) for a in args]
        return [*args, prompt]

    def _wrap(self, argv: list[str], env: dict[str, str], ctx: Context, snap: confine.Snapshot,
              tmp: Path) -> list[str]:
        """argv inside bwrap: the worktree and tmp writable, the git directory and $HOME hidden."""
        home = environment.home()
        layout = bwrap.Layout(worktree=ctx.worktree, scratch=tmp, common=snap.common, main=snap.main, home=home,
                              network=self.config.agent.network,
                              read_only=[Path(f) for f in settings.global_and_system_files()
                                         if home in Path(f).parents],
                              tools=bwrap.tools(home, env.get("PATH", ""), [argv[0], sys.executable, *scripts(argv)]))
        return bwrap.command(layout, argv)

    def propose(self, ctx: Context) -> Proposal:
        say = ctx.say or (lambda s: None)
        t = ctx.target
        inspector = ctx.artifacts.get("workloads")
        watch = [str(w) for w in (getattr(self.config.agent, "watch", None) or [])]
        snap = confine.take(ctx.worktree, watch)
        for path, e in snap.files.items():
            if e.digest.startswith("too-many-files"):
                say(f"  warning: {path} holds over {confine.MAX_WALK} files, too many to compare; "
                    "watch the files in it that matter instead ([agent] watch)")
        own_branch = confine.head_of(ctx.worktree)
        base = repo.head_sha(ctx.worktree)
        backup = snap.common / "autogk" / "confined" / f"{ctx.number:04d}"
        escaped: list[str] = []
        with tempfile.TemporaryDirectory(prefix="autogk-command-") as tmp:
            hyp_file = Path(tmp) / "hypothesis.txt"
            prompt_file = Path(tmp) / "prompt.md"
            prompt = prompts.command_prompt(ctx, inspector.read_text() if inspector and inspector.exists() else None,
                                            str(hyp_file))
            prompt_file.write_text(prompt)
            sandbox_env, _ = confine.sandbox_env(ctx.worktree, Path(tmp))
            env = {**os.environ, "AUTOGK_PROMPT_FILE": str(prompt_file), "AUTOGK_HYPOTHESIS_FILE": str(hyp_file),
                   "AUTOGK_WORKTREE": str(ctx.worktree), "AUTOGK_TARGET_DIR": str(t.dir),
                   "AUTOGK_EDITABLE": ",".join(f"{t.rel}/{g}" for g in t.editable),
                   "AUTOGK_EXPERIMENT": str(ctx.number), **sandbox_env,
                   # Tells the agent's commits from a person's, should it commit in the real repository.
                   "GIT_COMMITTER_EMAIL": snap.marker}
            argv, cli_line = permissions.for_cli(self.argv(prompt, prompt_file), Path(tmp))
            box, box_line = bwrap.choose(self.config.agent), bwrap.describe(self.config.agent)
            # Without bwrap nothing stops it writing the judge's Python environment: compare it (pyenv.py).
            env_roots = pyenv.judge_roots() if box != "bwrap" and self.config.agent.watch_python else []
            env_before = pyenv.fingerprint(env_roots)
            if box != "bwrap" and self.config.agent.sandbox == "bwrap" and not self._warned:
                self._warned = True  # once per run: the note of every experiment says it too
                say(f"  warning: the command agent runs without an OS sandbox ({box[len('none: '):]}): only the "
                    "undo after its run confines it; see `autogk doctor`, or set [agent] sandbox = \"none\"")
            notes_before = [box_line] + ([cli_line] if cli_line else [])
            shown = shlex.join(argv[:-1] if argv[-1] == prompt else argv)
            say(f"  running {shown}{' <prompt>' if argv[-1] == prompt else ''} in {ctx.worktree} ({box_line})")
            timeout = self.config.agent.command_timeout_s
            t0 = time.monotonic()
            # What the reaper killed after the run (reaper.py), in a folder of its own: the reaper writes
            # it outside the sandbox, and in the scratch folder the agent could make it a link to any file.
            private = Path(tempfile.mkdtemp(prefix="autogk-reaper-"))
            left = private / "left-running.json"
            try:
                run = argv
                if box == "bwrap":  # a missing program would be bwrap's error, an exit code like the CLI's own
                    run = self._wrap([_program(argv[0], ctx.worktree, env.get("PATH")), *argv[1:]], env, ctx, snap,
                                     Path(tmp))
                # Under the reaper: nothing the agent starts outlives its run (a process left running would
                # outlive the undo and the environment's comparison below, and could write or load later).
                proc = reaper.run(run, str(left), timeout, cwd=str(ctx.worktree), env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
                if "not_found" in reaper.read_report(left):
                    raise FileNotFoundError(argv[0])
            except FileNotFoundError:
                raise AgentError(f"the command agent's program '{argv[0]}' was not found",
                                 "install it or fix [agent] command (AUTOGK_AGENT_COMMAND)") from None
            except subprocess.TimeoutExpired:
                raise AgentError(f"'{argv[0]}' ran past {timeout} s and was stopped",
                                 "raise [agent] command_timeout_s, or ask for a smaller change") from None
            finally:
                # Whatever happened (a crash, Ctrl-C, a timeout), put back what it reached first.
                own_commits = confine.sandbox_commits(sandbox_env, Path(tmp), base)
                escaped = confine.check_and_undo(snap, backup, own_branch)
                killed = int(reaper.read_report(left).get("killed") or 0)
                shutil.rmtree(private, ignore_errors=True)
                if killed:
                    say(f"  the agent left {killed} process(es) running after it ended: killed")
                env_changed = pyenv.changes(env_before, pyenv.fingerprint(env_roots)) if env_roots else []
                if env_changed:
                    escaped += [f"the Python environment: {c}" for c in env_changed[:20]]
                    snap.stop.append(pyenv.stop_line(env_changed))
                for line in escaped:
                    say(f"  outside its files: {line}")
                if snap.stop:
                    raise AgentError("the agent reached outside its files in a way only you can undo: "
                                     + "; ".join(snap.stop), "undo it as said above, then run autogk iterate again")
            hypothesis = _first_line(hyp_file)
        output = (proc.stdout or "").strip()
        if proc.returncode != 0:
            undo(ctx.worktree, changed_paths(ctx.worktree))
            tail = ((proc.stderr or "") + "\n" + output).strip()[-800:]
            extra = f" (it also reached outside its files, undone: {'; '.join(escaped)})" if escaped else ""
            raise AgentError(f"'{argv[0]}' exited with code {proc.returncode}: {tail}{extra}",
                             "run the command by hand in a checkout to see what it needs")
        changes = changed_paths(ctx.worktree)
        inside = [(s, p) for s, p in changes if t.is_editable(p)]
        outside = [c for c in changes if c not in inside]
        notes = notes_before + list(own_commits)
        if killed:
            notes.append(f"the agent left {killed} process(es) running after it ended; killed (agents/reaper.py)")
        for line in own_commits:
            say(f"  {line}")
        if outside:
            undo(ctx.worktree, outside)
            msg = (f"discarded changes outside the editable files ({t.rel}/{{{','.join(t.editable)}}}): "
                   + ", ".join(p for _, p in outside))
            say(f"  {msg}")
            notes.append(msg)
        for sp, why in not_plain(ctx.worktree, inside):
            undo(ctx.worktree, [sp])
            inside.remove(sp)
            escaped.append(f"{why}; put back")
            say(f"  refused: {why}")
        if escaped:
            escaped.append(f"copies of what the agent wrote, where kept: {backup}" if backup.exists() else
                           "nothing it wrote needed a copy")
        if not inside and not escaped:
            return Proposal("no change", f"`{self.command}` changed no editable file.\n\n{output[-TAIL:]}\n"
                            + "\n".join(notes), changed=False)
        if not hypothesis:
            lines = [line.strip() for line in output.splitlines() if line.strip()]
            hypothesis = lines[-1] if lines else f"{argv[0]}: change to {', '.join(p for _, p in inside)}"
        hypothesis = " ".join(hypothesis.split())[:200]
        rationale = (f"## Plan (command agent: `{self.command}`, experiment {ctx.number:04d})\n\n"
                     f"{hypothesis}\n\n### Output (tail)\n\n```\n{output[-TAIL:]}\n```\n")
        if notes:
            rationale += "\n" + "\n".join(f"- {n}" for n in notes) + "\n"
        invalid = ""
        if escaped:
            # Listed first in the note: the commit body keeps only its first lines.
            rationale = ("## INVALID: the agent reached outside its files (undone; not benchmarked)\n\n"
                         + "\n".join(f"- {e}" for e in escaped) + "\n\n" + rationale)
            invalid = f"the agent reached outside its files: {len(escaped) - 1} change(s) undone"
        if ctx.plan_id:
            rationale += f"\nFollows the research plan on {ctx.plan_id[:10]}.\n"
        return Proposal(hypothesis, rationale, usage={"command_s": round(time.monotonic() - t0, 2)},
                        invalid=invalid)


def _first_line(path: Path, limit: int = 4096) -> str:
    """The first line of the file the agent was asked to write its hypothesis to, read outside the
    sandbox: a regular file only, never a link (one to a file the sandbox hides, ~/.git-credentials say,
    would put its text in the commit and the branch name), and only its first `limit` bytes."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return ""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return ""
        text = os.read(fd, limit).decode(errors="replace").strip()
    finally:
        os.close(fd)
    return text.splitlines()[0].strip() if text else ""
