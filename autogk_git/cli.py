"""The `autogk` command: parse, call one function, print. Heavy SDKs load only inside commands."""
from __future__ import annotations

import os
import sys
import tempfile
import traceback

import click

from autogk_git import __version__, env
from autogk_git.errors import AutogkError

# name -> "module:function"; each module holds one subcommand.
COMMANDS = {
    "init": "autogk_git.commands.init:init",
    "iterate": "autogk_git.commands.iterate:iterate",
    "conclude": "autogk_git.commands.conclude:conclude",
    "bench": "autogk_git.commands.bench:bench",
    "log": "autogk_git.commands.log:log",
    "show": "autogk_git.commands.show:show",
    "hooks": "autogk_git.commands.hooks:hooks",
    "doctor": "autogk_git.commands.doctor:doctor",
    "sync": "autogk_git.commands.sync:sync",
    "best": "autogk_git.commands.best:best",
    "bisect": "autogk_git.commands.bisect:bisect",
    "pick": "autogk_git.commands.pick:pick",
    "pack": "autogk_git.commands.pack:pack",
    "ui": "autogk_git.commands.ui:ui",
    "report": "autogk_git.commands.report:report",
    "research": "autogk_git.commands.research:research",
    "remote": "autogk_git.commands.remote:remote",
}


class LazyGroup(click.Group):
    """Imports a subcommand's module only when that subcommand runs (or its help is shown)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        import importlib
        mod, attr = COMMANDS[name].split(":")
        return getattr(importlib.import_module(mod), attr)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, HELP.get(name, "")) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


HELP = {
    "init": "Make a repo an autogk project and add a kernel target.",
    "iterate": "Run the optimization loop: propose, commit, benchmark, keep or revert.",
    "conclude": "Conclude open or hand-made experiments (benchmark if needed); start none.",
    "bench": "Benchmark a kernel (the trunk's by default) without an experiment.",
    "log": "One line per experiment: number, verdict, hypothesis, figures (filters, --json).",
    "show": "One experiment: plan, diff and per-workload table.",
    "hooks": "Install or remove autogk's git hooks.",
    "doctor": "Check the installation, the project and the backends.",
    "sync": "Fetch the shared notes and log result notes that MLflow does not have yet.",
    "bisect": "Find the trunk commit that made a workload slower or broke correctness.",
    "pick": "Cherry-pick an experiment (kept or archived) onto another branch and benchmark it there.",
    "pack": "Write a FlashInfer-Bench Solution JSON of a kernel (the best kept one by default).",
    "ui": "Open the MLflow UI on the project's runs (127.0.0.1; prints the URL).",
    "report": "A PNG and an HTML page of the run's figures, also logged to MLflow.",
    "research": "Write a research plan for the next experiment.",
    "best": "The best kept kernel per target.",
    "remote": "Add or set up a remote so git fetch brings autogk's notes and refs.",
}


def quiet_libraries(verbose: int) -> None:
    """MLflow's own INFO lines (database creation, migrations) are noise in autogk's output; -v shows them.

    Set through the environment before any command imports mlflow, so the hooks and workers started
    from here inherit it; without -v a level the user exported already wins.
    """
    import logging
    level = "DEBUG" if verbose > 1 else "INFO" if verbose else "WARNING"
    if verbose:
        os.environ["MLFLOW_LOGGING_LEVEL"] = level
    else:
        os.environ.setdefault("MLFLOW_LOGGING_LEVEL", level)
    for name in ("mlflow", "alembic"):
        logging.getLogger(name).setLevel(level)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="autogk")
@click.option("-v", "--verbose", count=True,
              help="show the libraries' own log lines (MLflow's); -vv: debug (also AUTOGK_VERBOSE=1)")
def cli(verbose: int) -> None:
    """autogk: a git repository as an autonomous, statistically honest Triton kernel optimizer."""
    quiet_libraries(verbose or env.verbosity())
    warn_unknown_variables()


def warn_unknown_variables() -> None:
    """One line per AUTOGK_* variable that nothing reads (a typo would otherwise be ignored silently)."""
    from autogk_git.config import SCHEMA
    names = [env.config_override_name(sec, key) for sec, keys in SCHEMA.items() for key in keys]
    for name, close in env.unknown_autogk_names(names):
        click.echo(f"warning: {name} is set but autogk reads no such variable"
                   + (f"; did you mean {close}?" if close else "; config overrides are AUTOGK_<SECTION>_<KEY>, "
                      "see the commented keys in .autogk.toml"), err=True)


def as_printed(text: str) -> str:
    """The one rule for a printed command: it works as printed. `autogk ...` in backticks (or opening a
    hint) becomes the way this installation is called (invocation.command_name: the full path of the
    script when PATH does not find it, as before `source .venv/bin/activate`)."""
    import re
    from autogk_git.invocation import command_name
    cmd = command_name()
    if cmd == "autogk":
        return text
    return re.sub(r"(^|`)autogk (?=[a-z-])", lambda m: f"{m[1]}{cmd} ", text)


def main() -> None:
    try:
        rc = cli.main(standalone_mode=False)
    except AutogkError as e:
        click.echo(f"error: {e.message}", err=True)
        if e.hint:
            click.echo(f"hint: {as_printed(e.hint)}", err=True)
        sys.exit(1)
    except click.exceptions.Abort:
        click.echo("interrupted", err=True)
        sys.exit(130)
    except KeyboardInterrupt:
        click.echo("\ninterrupted: state is in git; run the same command again to resume", err=True)
        sys.exit(130)
    except click.ClickException as e:
        e.show()
        sys.exit(e.exit_code)
    except Exception:  # a crash: keep the details for a bug report
        fd, path = tempfile.mkstemp(prefix="autogk-crash-", suffix=".log")
        with os.fdopen(fd, "w") as f:
            f.write(f"autogk {__version__}, python {sys.version}\nargv: {sys.argv}\n\n{traceback.format_exc()}")
        click.echo(f"autogk crashed: {traceback.format_exc().strip().splitlines()[-1]}\n"
                   f"details: {path}", err=True)
        sys.exit(3)
    sys.exit(rc if isinstance(rc, int) else 0)
