"""The README's "Your own kernel" block, word for word, as a new user runs it: a fresh clone of this
repository, one fresh shell, no API key, no GPU, no git identity. It must end in experiments on the
user's own target, in the new repository, with the clone itself unchanged."""
from __future__ import annotations

import os
import re
import subprocess

import pytest

from conftest import BIN, REPO, git
from test_readme import README, hermetic_env


def own_kernel_block() -> str:
    """The first bash block of the README's "Your own kernel" section, exactly as printed."""
    section = README.read_text().split("## Your own kernel", 1)[1].split("\n## ", 1)[0]
    m = re.search(r"```bash\n(.*?)```", section, re.S)
    assert m, "the README's 'Your own kernel' section has no ```bash block"
    return m.group(1)


def test_the_block_is_one_a_person_can_paste():
    block = own_kernel_block()
    assert "path/to/" not in block, "placeholders do not run as written: name files that exist"
    for path in re.findall(r"(?<=\s)(tests/\S+)", block):
        assert (REPO / path).is_file(), f"the README's own-kernel block names {path}, which does not exist"


@pytest.mark.slow(18)
def test_the_own_kernel_block_runs_as_written_on_a_fresh_clone(tmp_path):
    env = hermetic_env(tmp_path / "home")
    (tmp_path / "home" / ".gitconfig").write_text("[init]\n\tdefaultBranch = main\n")  # a new user: no identity
    env["CUDA_VISIBLE_DEVICES"] = ""  # no GPU, whatever this machine has
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if p != str(BIN))  # only `source` adds it
    clone = tmp_path / "autogk"
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True, env=env, capture_output=True)
    # `bash scripts/setup.sh` is left out (this interpreter's environment is made already): the clone's
    # .venv/bin/activate activates that one, so the block's `source .venv/bin/activate` runs as printed.
    (clone / ".venv" / "bin").mkdir(parents=True)
    (clone / ".venv" / "bin" / "activate").write_text(f"source {BIN / 'activate'}\n")
    before = (git(clone, "status", "--porcelain", "--ignored=no"), git(clone, "for-each-ref"))
    # One shell, every line as printed; `set -e` stops at the first command that fails.
    proc = subprocess.run(["bash", "-ec", own_kernel_block()], cwd=clone, capture_output=True, text=True,
                          timeout=1200, env=env)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "Traceback" not in out and "Please tell me who you are" not in out, out
    assert "done: 3 experiment(s)" in proc.stdout, out
    mine = tmp_path / "my-kernels"
    assert (mine / ".git").is_dir() and (mine / "kernels" / "scale" / "kernel.py").is_file()
    log = subprocess.run([str(BIN / "autogk"), "log"], cwd=mine, capture_output=True, text=True, env=env).stdout
    assert all(f"scale #000{n}" in log for n in (1, 2, 3)), log
    # The checkout the user typed it in is as it was: nothing written, committed or branched there.
    assert (git(clone, "status", "--porcelain", "--ignored=no"), git(clone, "for-each-ref")) == before
