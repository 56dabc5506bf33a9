"""Shared by the review tests: one iterated project built per session, copied per test."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from conftest import BIN, built_once

ENV = {"GIT_AUTHOR_NAME": "T", "GIT_AUTHOR_EMAIL": "t@example.com",
       "GIT_COMMITTER_NAME": "T", "GIT_COMMITTER_EMAIL": "t@example.com"}


def iterated_template(template_project: Path, tmp_path_factory, n: int = 3) -> Path:
    """template_project after `autogk iterate -n N` (keeps and reverts, notes, MLflow), built once per
    run for every worker (conftest.built_once)."""
    def build(folder: Path) -> None:
        root = folder / "proj"
        shutil.copytree(template_project, root, symlinks=True)
        home = folder / "home"
        home.mkdir()
        cfg = home / ".gitconfig"
        cfg.write_text("[user]\n\tname = T\n\temail = t@example.com\n")
        env = {**os.environ, **ENV, "HOME": str(home), "GIT_CONFIG_GLOBAL": str(cfg), "GIT_CONFIG_NOSYSTEM": "1"}
        subprocess.run([str(BIN / "autogk"), "hooks", "install"], cwd=root, check=True, capture_output=True, env=env)
        proc = subprocess.run([str(BIN / "autogk"), "iterate", "-n", str(n), "--json"], cwd=root,
                              capture_output=True, text=True, env=env)
        assert proc.returncode == 0, proc.stderr
        (folder / "iterate.json").write_text(proc.stdout)

    return built_once(tmp_path_factory, f"iterated-{n}", build) / "proj"


def copy_project(src: Path, dst: Path, keep_mlruns: bool = False) -> Path:
    """A copy, by default without the MLflow store (its runs point at the source's artifact folder;
    keep it only for tests that just read the store)."""
    shutil.copytree(src, dst, symlinks=True, ignore=None if keep_mlruns else shutil.ignore_patterns("mlruns"))
    if (src.parent / "iterate.json").exists():
        shutil.copyfile(src.parent / "iterate.json", dst.parent / "iterate.json")
    # In-process: the function `autogk hooks install` calls, without an interpreter per copy.
    from autogk_git.git import hooks
    from autogk_git.record import refs
    hooks.install(dst, refs.NOTES_GLOB)
    return dst


def iterate_report(root: Path) -> dict:
    return json.loads((root.parent / "iterate.json").read_text())
