"""Screenshots of the MLflow UI after a demo run: the runs list, one experiment's run, and the trace of
the agent's conversation. The PNGs the README shows (docs/mlflow-*.png) are made by this script.

    .venv/bin/python scripts/mlflow_screenshots.py            # writes docs/mlflow-{runs,run,trace}.png
    .venv/bin/python scripts/mlflow_screenshots.py --out /tmp/shots --keep /tmp/demo

The demo is real except for the model: a project with the tests' `scale` target, `autogk iterate -n 2
--agent anthropic` against the stand-in Messages API on 127.0.0.1 (tests/fake_messages_server.py, a
scripted conversation: read the kernel, change BLOCK, check, finish), the CPU interpreter, the SQLite
store; then `autogk ui` and headless Chromium (Debian: `apt-get install chromium`). About 3 minutes on
a busy 2-core machine.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
SCALE = REPO / "tests" / "data" / "scale"
KERNEL = "kernels/scale/kernel.py"
sys.path.insert(0, str(REPO / "tests"))

from fake_messages_server import FakeMessages, finish, text, tool_use  # noqa: E402


def script():
    """Two experiments' conversations, as a model might hold them."""
    return [
        tool_use("read_file", {"path": KERNEL}, text="Let me read the kernel first."),
        tool_use("read_artifact", {"name": "workloads"}, text="n runs from 50 to 4096; one program per 64."),
        tool_use("edit_file", {"path": KERNEL, "old": "BLOCK = 64 ", "new": "BLOCK = 128 "},
                 text="Larger blocks halve the programs on the large workloads."),
        tool_use("run_check", {}),
        finish("BLOCK 64 -> 128: half the programs", "Fewer, larger programs: less launch overhead at n=4096."),
        tool_use("history", {}, text="The last experiment doubled BLOCK; try the other way for small n."),
        text("Small workloads (n=50) use one program either way; a smaller block wastes fewer lanes."),
        tool_use("edit_file", {"path": KERNEL, "old": "BLOCK = 64 ", "new": "BLOCK = 32 "}),
        finish("BLOCK 64 -> 32: fewer idle lanes at n=50", "Masked lanes are wasted work on the small workloads."),
    ]


def run(cmd, cwd, env, **kw):
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, **kw)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(map(str, cmd))} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return proc


def demo(where: Path, env: dict[str, str]) -> Path:
    root = where / "demo"
    run([BIN / "autogk", "init", str(root), "--definition", SCALE / "definition.json", "--workloads",
         SCALE / "workloads.jsonl", "--kernel", SCALE / "kernel.py"], where, env)
    with FakeMessages(script()) as srv:
        run([BIN / "autogk", "iterate", "-n", "2", "--agent", "anthropic"], root,
            {**env, "ANTHROPIC_API_KEY": "sk-ant-demo-not-a-real-key", "ANTHROPIC_BASE_URL": srv.url})
    return root


def ids(root: Path) -> tuple[str, str, str]:
    """(experiment id, run id of experiment 1, its trace id) from the demo's store."""
    from mlflow import MlflowClient

    from autogk_git.project import Project
    c = MlflowClient(tracking_uri=Project(root).tracking_uri())
    exp = c.get_experiment_by_name("autogk/scale")
    [r] = c.search_runs([exp.experiment_id], filter_string="tags.`autogk.number` = '0001'")
    [t] = c.search_traces(locations=[exp.experiment_id], run_id=r.info.run_id)
    return exp.experiment_id, r.info.run_id, t.info.trace_id


def shoot(browser: str, url: str, png: Path, profile: Path, size: str = "1600,1000") -> None:
    png.unlink(missing_ok=True)
    subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    "--disable-background-networking", "--disable-component-update", "--disable-sync",
                    "--no-first-run", f"--window-size={size}", "--virtual-time-budget=30000",
                    f"--user-data-dir={profile}", f"--screenshot={png}", url],
                   capture_output=True, timeout=240)
    if not png.exists() or png.read_bytes()[:4] != b"\x89PNG":
        sys.exit(f"chromium made no screenshot of {url}")
    print(f"{png}  <- {url}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=REPO / "docs", help="folder for the PNGs (default: docs/)")
    ap.add_argument("--keep", type=Path, help="make the demo here and keep it (default: a temporary folder)")
    args = ap.parse_args()
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        sys.exit("chromium is not installed: apt-get install chromium (Debian), then run this again")
    where = args.keep or Path(tempfile.mkdtemp(prefix="autogk-shots-"))
    where.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false"}
    env = {k: v for k, v in env.items() if not k.startswith(("AUTOGK_", "ANTHROPIC_"))}
    print(f"demo run in {where} (the CPU interpreter and a stand-in for the Messages API) ...")
    root = demo(where, env)
    exp_id, run_id, trace_id = ids(root)
    ui = subprocess.Popen([BIN / "autogk", "ui", "--port", "0"], cwd=root, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL, text=True)
    try:
        runs_url = ui.stdout.readline().strip()
        if not runs_url.startswith("http://"):
            sys.exit(f"autogk ui printed {runs_url!r}, not a URL")
        base = runs_url.split("/#/", 1)[0]
        args.out.mkdir(parents=True, exist_ok=True)
        shoot(browser, runs_url, args.out / "mlflow-runs.png", where / "chrome-1")
        shoot(browser, f"{base}/#/experiments/{exp_id}/runs/{run_id}", args.out / "mlflow-run.png", where / "chrome-2")
        shoot(browser, f"{base}/#/experiments/{exp_id}/traces?selectedEvaluationId={trace_id}",
              args.out / "mlflow-trace.png", where / "chrome-3")
    finally:
        ui.terminate()
        ui.wait(timeout=30)
    print(json.dumps({"demo": str(root), "experiment": exp_id, "run": run_id, "trace": trace_id}))
    if args.keep is None:
        shutil.rmtree(where, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
