"""The modal backend offline: the function body on CPU through `.local()`, the app and image as built,
and every way Modal can be missing failing within seconds with the next command to run."""
from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import autogk_in, git

pytest.importorskip("modal")

from autogk_git import config as config_mod  # noqa: E402
from autogk_git.bench.backends.modal import app as modal_app  # noqa: E402
from autogk_git.bench.backends.interpret import InterpretBackend  # noqa: E402
from autogk_git.bench.backends.modal.backend import ModalBackend, preflight, token_source  # noqa: E402
from autogk_git.bench.job import make_job  # noqa: E402
from autogk_git.errors import BenchError  # noqa: E402
from autogk_git.project import Project  # noqa: E402

CPU = {"TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": ""}


def _job(project_root: Path, kernel: str, workloads=None, stage: str = "quick"):
    p = Project(project_root)
    t = p.target("scale")
    wls = workloads or t.workloads[:2]
    return p, make_job(t, stage, {"candidate": {"kernel.py": kernel}}, wls,
                       {"trials": 2, "reps": 1, "warmup": 0, "timer": "cudagraph", "device": "cpu"}, seed=7)


def _shape(res: dict) -> dict:
    """What must agree between backends: keys, labels, workloads, statuses, environment keys."""
    return {"keys": sorted(res), "statuses": {lab: {u: w["status"] for u, w in wl.items()}
                                               for lab, wl in res["labels"].items()},
            "env": sorted(k for k in res["environment"] if k != "runner"),
            "versions": {k: res["environment"][k] for k in ("python", "torch", "triton")}}


@pytest.mark.filterwarnings("ignore:The autogk_bench function is executing locally")
def test_function_body_local_gives_the_interpret_backends_result(project):
    p, _ = _job(project, "")
    good = (project / "kernels/scale/kernel.py").read_text()
    bad = good.replace("MASK = True", "MASK = False")  # leaves the tail unwritten
    cfg = config_mod.parse({})
    _, _, fn = modal_app.build(cfg)
    for kernel, want in ((good, "PASSED"), (bad, "INCORRECT_NUMERICAL")):
        _, job = _job(project, kernel)
        local = InterpretBackend(p.config).run(job, 120)
        body = fn.local(job, 120, None, CPU)
        assert _shape(body) == _shape(local)
        assert set(_shape(body)["statuses"]["candidate"].values()) == {want}
        # Versions come from inside the process that ran the kernel, and say where it ran.
        assert body["environment"]["runner"] == "local" and body["environment"]["interpret"] is True


def test_blobs_travel_inside_the_call(project, tmp_path):
    torch = pytest.importorskip("torch")
    from safetensors.torch import save_file
    kernel = (project / "kernels/scale/kernel.py").read_text()
    p, job = _job(project, kernel)
    blob_dir = project / "kernels/scale/blobs"
    blob_dir.mkdir()
    save_file({"x": torch.arange(100, dtype=torch.float32)}, str(blob_dir / "x.safetensors"))
    wl = dict(job["workloads"][0], inputs={"x": {"type": "safetensors", "path": "blobs/x.safetensors",
                                                 "tensor_key": "x"},
                                           "bias": {"type": "random"}, "scale": {"type": "scalar", "value": 1.5}})
    job = dict(job, workloads=[wl])
    blobs, blob_dir_remote, job = ModalBackend(p.config)._pack_blobs(job)
    assert list(blobs) == ["blobs/x.safetensors"] and blob_dir_remote is None
    # The container has no project folder: blob_root must not be needed.
    job = dict(job, blob_root="/nonexistent")
    res = modal_app.autogk_bench(job, 120, blobs, CPU)
    assert res["labels"]["candidate"][wl["uuid"]]["status"] == "PASSED"
    # Over the inline limit and without a Volume: a clear refusal, not an upload.
    cfg = config_mod.parse({"modal": {"inline_blobs_mb": 0, "volume": ""}})
    with pytest.raises(BenchError, match="inline_blobs_mb"):
        ModalBackend(cfg)._pack_blobs(dict(job, blob_root=str(project / "kernels/scale")))


def test_app_and_image_are_built_offline_with_the_configured_pins():
    cfg = config_mod.parse({"modal": {"gpu": "H100", "torch": "2.8.0", "triton": "3.4.0", "python": "3.11",
                                      "timeout_s": 1200, "retries": 2}})
    app, image, fn = modal_app.build(cfg)
    assert app.name == "autogk-bench"
    assert fn._spec_.gpus == "H100"
    cmds = modal_app.image_commands(image)
    assert any(c.startswith("FROM python:3.11") for c in cmds)
    pip = [c for c in cmds if "pip install" in c and "torch==" in c]
    assert pip and all(x in pip[0] for x in ("torch==2.8.0", "triton==3.4.0", "safetensors=="))
    assert any(c.startswith("MOUNT") and "module_name='autogk_git'" in c for c in cmds)
    spec = modal_app.image_spec(cfg)
    assert (spec["timeout_s"], spec["retries"]) == (1200, 2)
    shipped = Path(spec["sources"]["autogk_git"])
    for f in ("bench/judge/process.py", "bench/judge/kernel_process.py", "bench/runner.py", "bench/backends/modal/app.py", "errors.py"):
        assert (shipped / f).is_file()
    # Defaults: B200, and the function is pickled by reference (no bytecode crosses Python versions).
    _, _, fn_default = modal_app.build(config_mod.parse({}))
    assert fn_default._spec_.gpus == "B200"
    import cloudpickle
    blob = cloudpickle.dumps(modal_app.autogk_bench)
    assert len(blob) < 200 and b"autogk_git.bench.backends.modal.app" in blob


def test_modal_is_imported_only_when_used():
    code = ("import sys; import autogk_git.bench.backends.modal.app, autogk_git.bench.backends.modal.backend, "
            "autogk_git.loop.parallel, autogk_git.commands.doctor; print('modal' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_no_token_fails_in_seconds_and_the_next_iterate_recovers(project):
    t0 = time.monotonic()
    out = autogk_in(project, "iterate", "-n", "1", "--backend", "modal", check=False)
    assert time.monotonic() - t0 < 20
    assert out.returncode == 1
    assert "needs a Modal token" in out.stderr and "modal token new" in out.stderr
    # The committed experiment is not lost: the next run (another backend) measures and concludes it.
    out = autogk_in(project, "iterate", "-n", "1", "--backend", "interpret", "--json")
    report = json.loads(out.stdout)
    assert any(r["number"] == 1 for r in report["resumed"])
    assert git(project, "branch", "--list", "autogk/*").strip() == ""


def _free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_unreachable_modal_fails_in_seconds(monkeypatch):
    monkeypatch.setenv("MODAL_TOKEN_ID", "ak-fake")
    monkeypatch.setenv("MODAL_TOKEN_SECRET", "as-fake")
    monkeypatch.setenv("MODAL_SERVER_URL", f"http://127.0.0.1:{_free_port()}")
    t0 = time.monotonic()
    with pytest.raises(BenchError) as e:
        preflight(config_mod.parse({}))
    assert time.monotonic() - t0 < 6
    assert "cannot reach Modal" in e.value.message and "autogk doctor" in e.value.hint


def test_a_server_that_never_answers_fails_within_the_connect_timeout(monkeypatch):
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    held = []
    stop = threading.Event()

    def accept() -> None:  # accept and hold connections, never answer: a fake token's minute-long hang
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(srv.accept()[0])
            except OSError:
                pass

    threading.Thread(target=accept, daemon=True).start()
    monkeypatch.setenv("MODAL_TOKEN_ID", "ak-fake")
    monkeypatch.setenv("MODAL_TOKEN_SECRET", "as-fake")
    monkeypatch.setenv("MODAL_SERVER_URL", f"http://127.0.0.1:{srv.getsockname()[1]}")
    cfg = config_mod.parse({"modal": {"connect_timeout_s": 2}})
    backend = ModalBackend(cfg)
    t0 = time.monotonic()
    try:
        with pytest.raises(BenchError) as e:
            backend.run({"settings": {}, "workloads": [], "sources": {}, "definition": {}}, 60)
    finally:
        stop.set()
        srv.close()
    assert time.monotonic() - t0 < 10
    assert "did not answer within 2 s" in e.value.message and "modal token new" in e.value.hint


def test_token_sources_are_read_without_the_network(tmp_path):
    assert token_source({"HOME": str(tmp_path)}) is None
    assert token_source({"HOME": str(tmp_path), "MODAL_TOKEN_ID": "a", "MODAL_TOKEN_SECRET": "b"}) == "environment"
    (tmp_path / ".modal.toml").write_text('[work]\ntoken_id = "ak-1"\ntoken_secret = "as-1"\nactive = true\n'
                                         '[other]\ntoken_id = "ak-2"\n')
    assert "profile work" in token_source({"HOME": str(tmp_path)})
    assert token_source({"HOME": str(tmp_path), "MODAL_PROFILE": "other"}) is None  # no secret there


def test_doctor_says_whether_modal_is_set_up(project):
    (project / ".autogk.toml").write_text((project / ".autogk.toml").read_text()
                                          .replace("[bench]\n", "[bench]\nbackend = \"modal\"\n", 1))
    info = json.loads(autogk_in(project, "doctor", "--json", check=False).stdout)
    assert info["modal"]["ready"] is False and "modal token new" in info["modal"]["next"]
    assert any("backend is modal" in p for p in info["problems"])
    text = autogk_in(project, "doctor", check=False).stdout
    assert "Modal: not set up (no token)" in text
    home = Path(subprocess.run(["sh", "-c", "echo $HOME"], capture_output=True, text=True).stdout.strip())
    (home / ".modal.toml").write_text('[default]\ntoken_id = "ak-1"\ntoken_secret = "as-1"\n')
    info = json.loads(autogk_in(project, "doctor", "--json", check=False).stdout)
    assert info["modal"]["ready"] is True and info["modal"]["app"] == "autogk-bench" and info["modal"]["gpu"] == "B200"
    assert "as-1" not in json.dumps(info)  # the secret is never printed
    assert not any("backend is modal" in p for p in info["problems"])


def test_the_commented_config_documents_every_modal_key():
    text = config_mod.render_default("main", "x")
    section = text[text.index("[modal]"):]
    for key, spec in config_mod.SCHEMA["modal"].items():
        assert f"# {key} = " in section and spec.doc in section
    assert "modal token new" in text
