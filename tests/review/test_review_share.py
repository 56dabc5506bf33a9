"""Sharing and viewing the history: push/clone/sync round trip, log/best/show/pack/report, the MLflow UI
in a real headless Chromium."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import BIN, autogk_in, git
from review_support import copy_project, iterated_template, iterate_report

# Where the report and UI screenshots are kept for a person to look at: only when asked (CI sets it);
# otherwise they stay in the test's temporary folder, so the suite never writes into the source tree.
ARTIFACTS = Path(os.environ["AUTOGK_TEST_ARTIFACTS"]) if os.environ.get("AUTOGK_TEST_ARTIFACTS") else None


@pytest.fixture
def iterated(template_project, tmp_path_factory, tmp_path):
    return copy_project(iterated_template(template_project, tmp_path_factory), tmp_path / "proj")


def mlflow_runs(root: Path) -> dict[int, str]:
    """{experiment number: verdict} as a separate process reading the project's MLflow store sees them."""
    code = ("import json\nfrom mlflow.tracking import MlflowClient\n"
            f"c = MlflowClient(tracking_uri='sqlite:///{root}/mlruns/mlflow.db')\n"
            "e = c.get_experiment_by_name('autogk/scale')\n"
            "runs = c.search_runs([e.experiment_id], filter_string=\"tags.`autogk.commit` != ''\") if e else []\n"
            "print(json.dumps({r.data.tags['autogk.number']: r.data.tags['autogk.verdict'] for r in runs}))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return {int(k): v for k, v in json.loads(out.strip().splitlines()[-1]).items()}


def test_push_clone_sync_round_trip(iterated, tmp_path):
    exps = {e["number"]: e["decision"] for e in iterate_report(iterated)["experiments"]}
    hub = tmp_path / "hub.git"
    git(tmp_path, "init", "-q", "--bare", str(hub))
    git(iterated, "remote", "add", "hub", str(hub))
    # The refspecs `autogk init` sets for existing remotes; sync sets them for a remote added later.
    fetch_only = {"AUTOGK_TRACKING_ENABLED": "false"}
    out = json.loads(autogk_in(iterated, "sync", "--remote", "hub", "--json", env=fetch_only).stdout)
    assert out["fetched_from"] == ["hub"]
    git(iterated, "push", "-q", "hub", "main")  # the branch; then the notes and the experiment refs:
    autogk_in(iterated, "sync", "--push", "--remote", "hub", env=fetch_only)
    hub_refs = git(hub, "for-each-ref", "--format=%(refname)")
    assert "refs/notes/autogk/results" in hub_refs and "refs/notes/autogk/plans" in hub_refs
    assert "refs/heads/main" in hub_refs
    assert sum(1 for r in hub_refs.split() if r.startswith("refs/autogk/")) == len(exps)

    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(hub), str(clone))
    assert json.loads(autogk_in(clone, "log", "--json").stdout) == []  # a plain clone has branches only
    out = json.loads(autogk_in(clone, "sync", "--json").stdout)
    assert out["fetched_from"] == ["origin"] and out["logged"] == len(exps)
    rows = json.loads(autogk_in(clone, "log", "--json").stdout)
    assert {r["number"]: r["decision"] for r in rows} == exps
    assert mlflow_runs(clone) == exps
    # Again: nothing new to log; and a note added upstream later arrives with the next sync.
    assert json.loads(autogk_in(clone, "sync", "--json").stdout)["logged"] == 0
    archived = next(r for r in rows if r["state"] == "archived")
    git(iterated, "notes", "--ref", "autogk/plans", "add", "-f", "-m", "a later thought", archived["commit"])
    autogk_in(iterated, "sync", "--push", "--remote", "hub", env=fetch_only)
    autogk_in(clone, "sync", env=fetch_only)
    assert git(clone, "notes", "--ref", "autogk/plans", "show", archived["commit"]).strip() == "a later thought"


def test_log_filters_best_show_pack_report(iterated, tmp_path):
    exps = iterate_report(iterated)["experiments"]
    rows = json.loads(autogk_in(iterated, "log", "--verdict", "keep", "--json").stdout)
    assert [r["number"] for r in rows] == [e["number"] for e in exps if e["decision"] == "keep"]
    assert json.loads(autogk_in(iterated, "log", "--since", "2h", "--json").stdout)
    assert json.loads(autogk_in(iterated, "log", "--since", "2999-01-01", "--json").stdout) == []
    assert json.loads(autogk_in(iterated, "log", "--state", "archived", "--json").stdout)[0]["decision"] == "revert"
    bad = autogk_in(iterated, "log", "--since", "yesterday-ish", check=False)
    assert bad.returncode == 1 and "hint:" in bad.stderr

    best = json.loads(autogk_in(iterated, "best", "--json").stdout)[0]
    last_kept = max(e["number"] for e in exps if e["decision"] == "keep")
    assert best["experiment"]["number"] == last_kept and "untimed" in best["basis"]
    assert git(iterated, "rev-parse", f"{best['trunk_commit']}^2").strip() == best["experiment"]["commit"]
    assert f"#{last_kept:04d}" in autogk_in(iterated, "best").stdout

    sol = tmp_path / "sol.json"
    autogk_in(iterated, "pack", "-o", str(sol))
    check = ("import json, sys\nfrom flashinfer_bench.data import Solution\n"
             f"s = Solution.model_validate_json(open({str(sol)!r}).read())\n"
             "print(json.dumps([s.definition, s.spec.language.value, s.spec.entry_point, s.sources[0].content]))\n")
    definition, lang, entry, content = json.loads(subprocess.run(
        [sys.executable, "-c", check], capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1])
    assert (definition, lang, entry) == ("scale", "triton", "kernel.py::run")
    assert content == git(iterated, "show", f"{best['trunk_commit']}:kernels/scale/kernel.py")

    out = json.loads(autogk_in(iterated, "report", "--out", str(tmp_path / "rep"), "--json").stdout)[0]
    png, page = Path(out["png"]), Path(out["html"]).read_text()
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    assert all(e["hypothesis"].replace(">", "&gt;") in page for e in exps)
    assert page.count('<tr class="keep">') == sum(e["decision"] == "keep" for e in exps)
    assert "No latency was measured" in page
    assert out["mlflow_run"]
    arts = list((iterated / "mlruns").rglob("report/scale.png"))
    assert arts, "the report's figure is an artifact of its MLflow run"
    if ARTIFACTS is not None:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(png, ARTIFACTS / "review_report.png")


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def test_mlflow_ui_shows_the_runs_in_a_real_browser(template_project, tmp_path_factory, tmp_path):
    browser = _chromium()
    if browser is None:
        pytest.skip("chromium is not installed and could not be installed here (CI installs it: .ci/run)")
    # The store `autogk iterate` wrote (the UI only reads it); older stores get autogk's view from `ui`.
    iterated = copy_project(iterated_template(template_project, tmp_path_factory), tmp_path / "proj",
                            keep_mlruns=True)
    exps = {e["number"]: e for e in iterate_report(iterated)["experiments"]}
    proc = subprocess.Popen([str(BIN / "autogk"), "ui", "--port", "0"], cwd=iterated, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:") and "/runs?viewStateShareKey=autogk" in url, proc.stderr.read()
        flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--window-size=1920,900",
                 "--virtual-time-budget=30000"]
        dom = ""
        for attempt in range(3):  # the SPA fetches the runs after load; give it another go if it was slow
            profile = tmp_path / f"chrome-{attempt}"
            dom = subprocess.run([browser, *flags, f"--user-data-dir={profile}", "--dump-dom", url],
                                 capture_output=True, text=True, timeout=180).stdout
            if all(f"{n:04d} {e['decision'].upper()}" in dom for n, e in exps.items()):
                break
        for n, e in exps.items():
            # run name: number, verdict, short commit, hypothesis
            assert f"{n:04d} {e['decision'].upper()} {e['commit'][:7]}" in dom
            assert e["commit"][:10] in dom          # the commit column
        for column in ("autogk.verdict", "autogk.commit_short", "autogk.figures", "workloads_passed"):
            assert column in dom
        assert "correct 5/5 (5 of 5 workloads checked), untimed" in dom  # the figures column's values
        (ARTIFACTS or tmp_path).mkdir(parents=True, exist_ok=True)
        shot = (ARTIFACTS or tmp_path) / "review_mlflow_ui.png"
        shot.unlink(missing_ok=True)
        subprocess.run([browser, *flags, f"--user-data-dir={tmp_path / 'chrome-shot'}", f"--screenshot={shot}", url],
                       capture_output=True, timeout=180)
        assert shot.exists() and shot.read_bytes()[:4] == b"\x89PNG"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
    time.sleep(0.5)
    assert proc.returncode is not None


def test_pack_refuses_a_kernel_whose_result_note_this_clone_did_not_write(iterated, tmp_path):
    """A person's commit on the trunk has no note, and pack refuses it; a keep note attached to it from
    elsewhere (a collaborator's push, merged in by `sync` because the commit had none here) made pack write
    the kernel as judged. A note not written here vouches for nothing until a judge here runs it."""
    from autogk_git.record.notes import format_result, parse_result
    best = json.loads(autogk_in(iterated, "best", "--json").stdout)[0]["experiment"]["commit"]
    real = parse_result(git(iterated, "notes", "--ref", "autogk/results", "show", best), best)
    kernel = iterated / "kernels" / "scale" / "kernel.py"
    kernel.write_text(kernel.read_text().replace("x * scale + b", "x * scale"))  # bias dropped: wrong
    git(iterated, "commit", "-qam", "by hand")
    sha = git(iterated, "rev-parse", "HEAD").strip()
    refused = autogk_in(iterated, "pack", "main", "-o", str(tmp_path / "a.json"), check=False)
    assert refused.returncode == 1 and "no autogk result judged" in refused.stderr, refused.stderr
    git(iterated, "notes", "--ref", "autogk/results", "add", "-f", "-m",
        format_result({**real, "commit": sha, "parent": git(iterated, "rev-parse", "HEAD^").strip()}), sha)
    out = autogk_in(iterated, "pack", "main", "-o", str(tmp_path / "b.json"), check=False)
    assert out.returncode == 1 and "was not written by this clone" in out.stderr, out.stdout + out.stderr
    assert not (tmp_path / "b.json").exists()
