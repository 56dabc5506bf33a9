"""`autogk doctor`: what is installed, what is configured, what would run — without touching the network."""
from __future__ import annotations

import json
import os
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import click


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


def checks() -> dict[str, Any]:
    from autogk_git.bench.backends import cuda_available
    out: dict[str, Any] = {"python": sys.version.split()[0], "executable": sys.executable,
                           "packages": {d: _version(d) for d in ("torch", "triton", "mlflow", "flashinfer-bench",
                                                                 "anthropic", "modal", "safetensors")},
                           "cuda": cuda_available(), "problems": []}
    for need in ("torch", "triton"):
        if not out["packages"][need]:
            out["problems"].append(f"{need} is not installed: pip install torch triton (CPU: torch==2.13.0 triton==3.7.1)")
    out["anthropic_api_key"] = bool(os.environ.get("ANTHROPIC_API_KEY"))
    cfg = None
    try:
        from autogk_git.git import hooks as hooks_mod
        from autogk_git.project import Project
        project = Project.find()
        cfg = project.config
        out["project"] = {"root": str(project.root), "trunk": project.trunk, "targets": {},
                          "hooks": hooks_mod.status(project.root), "tracking_uri": project.tracking_uri()}
        from autogk_git.bench.backends import resolve_name
        out["project"]["backend"] = resolve_name(cfg.bench.backend)
        for name in project.target_names():
            try:
                t = project.target(name)
                need = t.inputs_needing_data()
                out["project"]["targets"][name] = {"workloads": len(t.workloads), "needs_data": need}
                if need:
                    out["problems"].append(f"target {name}: provide data for {', '.join(need)} ({project.target_rel(name)}/inputs.py)")
            except Exception as e:  # noqa: BLE001 - report every target's problem
                out["project"]["targets"][name] = {"error": str(e)}
                out["problems"].append(f"target {name}: {e}")
        if "missing" in out["project"]["hooks"].values():
            out["problems"].append("hooks are not installed: autogk hooks install")
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
    except Exception as e:  # noqa: BLE001
        out["project"] = None
        out["project_error"] = str(e)
    out["modal"] = modal_status(cfg)
    if (out.get("project") or {}).get("backend") == "modal" and not out["modal"]["ready"]:
        out["problems"].append(f"[bench] backend is modal but Modal is not set up: {out['modal']['next']}")
    return out


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
    p = info.get("project")
    if p:
        click.echo(f"project {p['root']}: trunk {p['trunk']}, backend {p['backend']}, hooks {p['hooks']}")
        click.echo(f"  MLflow: {p['tracking_uri']}")
        for name, t in p["targets"].items():
            click.echo(f"  target {name}: {t}")
    else:
        click.echo(f"no project here ({info.get('project_error')})")
    for prob in info["problems"]:
        click.echo(f"problem: {prob}")
    if not info["problems"]:
        click.echo("all good")
    return 1 if info["problems"] else 0
