"""`autogk doctor`: what is installed, what is configured, what would run — without touching the network."""
from __future__ import annotations

import json
import shutil
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import click

from autogk_git import env


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def modal_status(cfg) -> dict[str, Any]:
    """Whether the modal backend could run: package, token, settings. Reads files only, never the network."""
    from autogk_git.bench.backends.modal.backend import server_url, token_source
    installed = _version("modal")
    token = token_source()
    out: dict[str, Any] = {"installed": installed, "token": token, "server": server_url(),
                           "app": cfg.modal.app if cfg else None, "gpu": cfg.modal.gpu if cfg else None,
                           "image": (f"python {cfg.modal.python}, torch {cfg.modal.torch}, triton {cfg.modal.triton}"
                                     if cfg else None)}
    if not installed:
        out["ready"], out["next"] = False, "pip install 'autogk[modal]'  (or: pip install modal)"
    elif not token:
        out["ready"], out["next"] = False, "modal token new  (or set MODAL_TOKEN_ID and MODAL_TOKEN_SECRET)"
    else:
        out["ready"], out["next"] = True, "autogk iterate --backend modal  (the token is checked on first use)"
    return out


def unrunnable_workloads(cfg, target) -> list[dict[str, Any]]:
    """The target's workloads the configured backend cannot run (the CPU interpreter skips large ones)."""
    from autogk_git.bench.backends import get_backend
    try:
        backend = get_backend(cfg.bench.backend, cfg)
        return backend.eligible(target.definition, target.workloads)[1]
    except Exception:  # noqa: BLE001 - a backend that cannot be set up is reported elsewhere
        return []


HOOKS_WARNING = ("hooks are not installed: `autogk iterate` benchmarks its own commits without them, but a "
                 "commit you make by hand on an experiment branch is benchmarked only with them; "
                 "to add them: autogk hooks install")


def hooks_path_override(root: Path) -> str:
    """What to say when core.hooksPath sends git to a hooks folder without autogk's hooks ('' if not)."""
    from autogk_git.git import hooks as hooks_mod
    from autogk_git.git import settings
    found = settings.origin(root, "core.hooksPath")
    if not found or "missing" not in hooks_mod.status(root).values():
        return ""
    where, value = found
    path = Path(where[5:]).resolve() if where.startswith("file:") else None
    scope = ("--global " if path in [f.resolve() for f in settings.global_files()] else
             "--system " if path in [f.resolve() for f in settings.system_files()] else "")
    unset = f"git config {scope}--unset core.hooksPath"
    return (f"core.hooksPath = {value} (set in {where}) overrides autogk's hooks: git runs the hooks in "
            f"{value} instead, and autogk's are not there; to use autogk's: {unset}, then autogk hooks install")


def checks() -> dict[str, Any]:
    """Everything doctor knows. `problems` stop the loop from working (exit 1); `warnings` do not.

    Missing hooks are a warning, not a problem: a fresh clone of a project (this repository's own
    README command 1 included) has none, since git never clones hooks, and the loop runs without them.
    """
    from autogk_git.bench.backends import cuda_available
    out: dict[str, Any] = {"python": sys.version.split()[0], "executable": sys.executable,
                           "packages": {d: _version(d) for d in ("torch", "triton", "mlflow", "flashinfer-bench",
                                                                 "anthropic", "modal", "safetensors")},
                           "cuda": cuda_available(), "problems": [], "warnings": []}
    for need in ("torch", "triton"):
        if not out["packages"][need]:
            out["problems"].append(f"{need} is not installed: pip install torch triton (CPU: torch==2.13.0 triton==3.7.1)")
    out["anthropic_api_key"] = env.has_anthropic_api_key()  # whether set, never the value
    # Every hint autogk prints says `autogk ...`: that works as printed only with the venv on PATH.
    here = Path(sys.executable).parent / "autogk"
    on_path = shutil.which("autogk")
    out["autogk_on_path"] = bool(on_path) and (not here.exists() or Path(on_path).resolve() == here.resolve())
    if not out["autogk_on_path"] and here.exists():
        venv = here.parent.parent
        out["warnings"].append(f"`autogk` on PATH is not this installation ({on_path or 'none'}), so hints that say "
                               f"`autogk ...` need {here} instead; or first: source {venv}/bin/activate")
    cfg = None
    from autogk_git.errors import AutogkError, NotAProject
    from autogk_git.project import Project
    try:
        project = Project.find()
    except NotAProject as e:
        project = None
        out["project"] = None
        out["project_error"] = e.message
        out["problems"].append(f"not an autogk project: no .autogk.toml in {Path.cwd()} or a folder above it; "
                               "to make one: autogk init --definition FILE --workloads FILE [--kernel FILE], "
                               "or autogk init --example rmsnorm_h4096 (a bundled target)")
    except AutogkError as e:  # a config that does not load stops every command: doctor lists it
        project = None
        out["project"] = None
        out["project_error"] = e.message
        out["problems"].append(e.message + (f"; fix: {e.hint}" if e.hint else ""))
    if project is not None:
        try:
            from autogk_git.git import hooks as hooks_mod
            cfg = project.config
            out["project"] = {"root": str(project.root), "trunk": project.trunk, "targets": {},
                              "hooks": hooks_mod.status(project.root), "tracking_uri": project.tracking_uri()}
            from autogk_git.bench.backends import resolve_name
            out["project"]["backend"] = resolve_name(cfg.bench.backend)
            out["problems"] += setup_problems(project)
            from autogk_git.agents import bwrap
            out["project"]["agent_sandbox"] = bwrap.describe(cfg.agent)[len("sandbox: "):]
            if cfg.agent.sandbox == "bwrap" and bwrap.probe():
                out["warnings"].append(f"the command agent would run without an OS sandbox ({bwrap.probe()}), "
                                       "confined only by the undo after its run; fix: apt-get install bubblewrap "
                                       "(and allow unprivileged user namespaces), or say so: [agent] sandbox = \"none\"")
            for name in project.target_names():
                try:
                    t = project.target(name)
                    need = t.inputs_needing_data()
                    if not need:
                        target_checks(project, t)
                    out["project"]["targets"][name] = {"workloads": len(t.workloads), "needs_data": need,
                                                       "folder": project.target_rel(name)}
                    unrunnable = unrunnable_workloads(cfg, t)
                    if unrunnable:
                        out["project"]["targets"][name]["unrunnable"] = len(unrunnable)
                        out["warnings"].append(
                            f"target {name}: {len(unrunnable)} of {len(t.workloads)} workload(s) cannot run on the "
                            f"{out['project']['backend']} backend ({unrunnable[0]['reason']}), so no verdict covers "
                            "them and nothing is judged on every workload: time on a GPU (`autogk iterate --backend "
                            "local` or `--backend modal`), or raise [bench] cpu_max_numel")
                    if need:
                        out["problems"].append(f"target {name}: provide data for {', '.join(need)} "
                                               f"({project.target_rel(name)}/inputs.py)")
                except Exception as e:  # noqa: BLE001 - report every target's problem
                    out["project"]["targets"][name] = {"error": str(e)}
                    out["problems"].append(f"target {name}: {e}")
            override = hooks_path_override(project.root)
            if override:
                out["warnings"].append(override)
            elif "missing" in out["project"]["hooks"].values():
                out["warnings"].append(HOOKS_WARNING)
            if "outdated" in out["project"]["hooks"].values():
                out["warnings"].append("autogk's hook shims here are from an older autogk, which started Python "
                                       "with the checkout's top folder first on its path (a folder named "
                                       "autogk_git there would run as the hook): run `autogk hooks install` "
                                       "to update them")
            from autogk_git.record import sharing
            bare = [r for r in sharing.remotes(project.root) if not sharing.is_setup(project.root, r)]
            out["project"]["remotes_without_notes"] = bare
            for r in bare:  # a plain `git fetch` from it brings branches but no experiments or notes
                out["warnings"].append(f"remote {r}: `git fetch` does not bring autogk's notes and experiment refs "
                                       f"from it; to share through it: autogk remote setup {r}")
            uri = project.tracking_uri()
            made = not uri.startswith("sqlite:///") or Path(uri[len("sqlite:///"):]).exists()
            if cfg.tracking.enabled and out["packages"]["mlflow"] and made:  # a store not made yet is fine
                from autogk_git.tracking import mlflow_store
                try:
                    mlflow_store.check(project)
                    behind = mlflow_store.unlogged(project)
                    if behind:
                        out["problems"].append(f"{len(behind)} experiment(s) have a result note but no MLflow run "
                                               f"(e.g. {behind[0][0]} #{behind[0][1]:04d}): autogk sync")
                except Exception as e:  # noqa: BLE001 - a locked, damaged or unreachable store: say which, and the fix
                    err = mlflow_store.describe_error(project, e)
                    out["problems"].append(f"{err.message}; fix: {err.hint}")
        except Exception as e:  # noqa: BLE001 - a broken project is reported, not a crash
            out["project_error"] = f"{type(e).__name__}: {e}"
            out["problems"].append(f"the project at {project.root} could not be read: {e}")
    out["modal"] = modal_status(cfg)
    if (out.get("project") or {}).get("backend") == "modal" and not out["modal"]["ready"]:
        out["problems"].append(f"[bench] backend is modal but Modal is not set up: {out['modal']['next']}")
    if (out.get("project") or {}).get("backend") == "slurm":  # asks the cluster: sinfo and a probe job
        from autogk_git.bench.backends.slurm import check as slurm_check
        out["slurm"] = slurm_check.status(cfg)
        out["problems"] += [f"SLURM: {p}" for p in out["slurm"]["problems"]]
    return out


def setup_problems(project) -> list[str]:
    """What `iterate` would trip on before any target is read: the targets folder, the default target,
    folders that lost their definition, the command agent's command."""
    cfg, out = project.config, project.layout_problems()
    from autogk_git.agents import resolve_kind
    if resolve_kind(cfg.agent.kind) == "command":
        import shlex
        command = cfg.agent.command.strip()
        if not command:
            out.append("[agent] kind = \"command\" but [agent] command is empty; fix: set command = \"claude -p\" "
                       "(a coding CLI that edits the kernel), or AUTOGK_AGENT_COMMAND")
        else:
            exe = shlex.split(command)[0]
            if shutil.which(exe) is None:
                out.append(f"[agent] command runs {exe!r}, which is not on PATH; fix: install it, or give its full path")
    return out


def target_checks(project, target) -> None:
    """A TargetError when the trunk lacks the target or its reference is broken (checked once per definition).
    The fast reference is not proven here (init, bench and iterate prove it): doctor never reported the
    proof, and making it runs both references on every CPU workload in a process of its own."""
    from autogk_git.loop.check import check_reference, trunk_target
    check_reference(project, trunk_target(project, target), cache=True, prove=False)


def _target_line(name: str, t: dict[str, Any]) -> str:
    if "error" in t:
        return f"  target {name}: cannot be read ({t['error']})"
    data = f"; needs input data for {', '.join(t['needs_data'])}" if t.get("needs_data") else ""
    return f"  target {name}: {t['workloads']} workload(s) in {t.get('folder', '?')}/{data}"


@click.command("doctor", help="Check the installation, the project and the backends.")
@click.option("--json", "as_json", is_flag=True, help="print JSON")
def doctor(as_json) -> int:
    info = checks()
    if as_json:
        click.echo(json.dumps(info, indent=1))
        return 1 if info["problems"] else 0
    click.echo(f"python {info['python']} ({info['executable']})")
    for k, v in info["packages"].items():
        click.echo(f"  {k:<17} {v or 'not installed'}")
    click.echo(f"CUDA GPU: {'yes' if info['cuda'] else 'no (benchmarks use the CPU interpreter: correctness only)'}")
    click.echo(f"ANTHROPIC_API_KEY: {'set' if info['anthropic_api_key'] else 'not set (the offline tune agent is used)'}")
    m = info["modal"]
    if m["ready"]:
        click.echo(f"Modal: set up (modal {m['installed']}, token from {m['token']}); app {m['app']}, "
                   f"gpu {m['gpu']}, image {m['image']}; not contacted, try: {m['next']}")
    else:
        click.echo(f"Modal: not set up ({'no token' if m['installed'] else 'not installed'}); "
                   f"to use the modal backend: {m['next']}")
    for line in (info.get("slurm") or {}).get("lines", []):
        click.echo(line)
    p = info.get("project")
    if p:
        missing = [f"{h} {state}" for h, state in p["hooks"].items() if state != "installed"]
        hooks = "installed" if not missing else f"not all current ({', '.join(missing)})"
        click.echo(f"project {p['root']}")
        click.echo(f"  trunk {p['trunk']}, backend {p['backend']}, hooks {hooks}")
        click.echo(f"  MLflow store: {p['tracking_uri']}")
        if p.get("agent_sandbox"):
            click.echo(f"  command agent sandbox: {p['agent_sandbox']}")
        for name, t in p["targets"].items():
            click.echo(_target_line(name, t))
    for w in info["warnings"]:
        click.echo(f"warning: {w}")
    for prob in info["problems"]:
        click.echo(f"problem: {prob}")
    if not info["problems"]:
        click.echo("all good" + (f" ({len(info['warnings'])} warning(s) above)" if info["warnings"] else ""))
    return 1 if info["problems"] else 0
