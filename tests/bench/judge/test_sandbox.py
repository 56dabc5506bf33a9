"""What a kernel's process may write (sandbox.kernel_paths)."""
from __future__ import annotations

from autogk_git.bench.judge import sandbox


def test_a_profiled_jobs_kernel_process_may_write_its_profile_and_no_other_job_may(tmp_path, monkeypatch):
    # benchmarks/profile_job.py sets AUTOGK_PROFILE_DIR: each process writes its cProfile file there at exit.
    # The kernel's process is confined to its own folder, so its profile was never written (only the
    # judge's): the folder is writable for it while profiling is asked for, and only then.
    monkeypatch.delenv("AUTOGK_PROFILE_DIR", raising=False)
    _, write = sandbox.kernel_paths(tmp_path / "kernel")
    assert str(tmp_path / "prof") not in write
    monkeypatch.setenv("AUTOGK_PROFILE_DIR", str(tmp_path / "prof"))
    _, write = sandbox.kernel_paths(tmp_path / "kernel")
    assert str(tmp_path / "prof") in write
