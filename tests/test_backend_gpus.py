"""The GPUs a machine offers, read once from `nvidia-smi -L` (a fake nvidia-smi on PATH stands in for the
driver): the `auto` backend's choice and the local backend's device list agree on the same reading."""
from __future__ import annotations

import os
import stat

import pytest

from autogk_git.bench import backends
from autogk_git.bench.backends import gpus, local


def fake_smi(tmp_path, monkeypatch, script: str) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text("#!/bin/sh\n" + script + "\n")
    smi.chmod(smi.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


def test_two_listed_gpus_make_auto_local_and_two_devices(tmp_path, monkeypatch):
    fake_smi(tmp_path, monkeypatch, 'echo "GPU 0: NVIDIA H200 (UUID: GPU-a)"; echo "GPU 1: NVIDIA H200 (UUID: GPU-b)"')
    assert len(gpus.listed()) == 2
    assert backends.cuda_available() and backends.resolve_name("auto") == "local"
    assert local.visible_gpus() == ["0", "1"]


@pytest.mark.parametrize("script", ["echo 'NVIDIA-SMI has failed: no driver'; exit 9", "exit 0"])
def test_a_failing_or_empty_nvidia_smi_offers_no_gpu(tmp_path, monkeypatch, script):
    fake_smi(tmp_path, monkeypatch, script)
    assert gpus.listed() == [] and local.visible_gpus() == []
    assert not backends.cuda_available() and backends.resolve_name("auto") == "interpret"
