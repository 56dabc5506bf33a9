from __future__ import annotations

import json
import os

from conftest import BIN, autogk, autogk_in, git


def test_doctor_reports_packages_project_and_backend(project):
    out = autogk_in(project, "doctor", "--json", check=False)
    info = json.loads(out.stdout)
    assert info["packages"]["torch"] and info["packages"]["triton"]
    assert info["project"]["trunk"] == "main"
    assert info["project"]["hooks"] == {"post-commit": "installed", "pre-commit": "installed"}
    assert info["project"]["targets"]["scale"]["workloads"] == 5
    assert info["anthropic_api_key"] is False
    assert info["problems"] == [] and out.returncode == 0


def test_doctor_outside_a_project_says_so_and_fails(tmp_path):
    out = autogk(tmp_path, "doctor", check=False)
    assert out.returncode == 1
    assert "not an autogk project" in out.stdout and "autogk init" in out.stdout
    assert "all good" not in out.stdout
    info = json.loads(autogk(tmp_path, "doctor", "--json", check=False).stdout)
    assert info["project"] is None and any("not an autogk project" in p for p in info["problems"])


def test_missing_hooks_are_a_warning_not_a_problem(project):
    """A fresh clone has no hooks (git never clones them) and the loop runs without them."""
    autogk(project, "hooks", "uninstall")
    out = autogk(project, "doctor", check=False)
    assert out.returncode == 0, out.stdout
    assert "problem:" not in out.stdout
    assert "warning: hooks are not installed" in out.stdout and "autogk hooks install" in out.stdout
    info = json.loads(autogk(project, "doctor", "--json").stdout)
    assert info["problems"] == [] and any("hooks" in w for w in info["warnings"])


def test_readable_output_has_no_python_dicts(project):
    out = autogk(project, "doctor").stdout
    assert "{" not in out and "'" not in out.replace("`", "")
    assert "target scale: 5 workload(s) in kernels/scale/" in out
    assert "hooks installed" in out
    assert out.rstrip().splitlines()[-1].startswith("all good")


def test_a_broken_target_is_a_problem_with_exit_1(project):
    (project / "kernels/scale/definition.json").write_text("{ not json")
    git(project, "commit", "-qam", "break the definition")
    out = autogk(project, "doctor", check=False)
    assert out.returncode == 1 and "problem: target scale" in out.stdout


def test_autogk_off_path_is_named_with_the_command_that_works(project):
    env = {"PATH": os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if p != str(BIN))}
    out = subprocess_doctor(project, env)
    assert f"{BIN / 'autogk'}" in out and "activate" in out


def subprocess_doctor(cwd, env) -> str:
    import subprocess
    return subprocess.run([str(BIN / "autogk"), "doctor"], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, **env}).stdout


def test_a_remote_that_does_not_fetch_notes_is_named_with_the_command_that_sets_it_up(project, tmp_path):
    hub = tmp_path / "hub.git"
    git(tmp_path, "init", "-q", "--bare", str(hub))
    git(project, "remote", "add", "hub", str(hub))  # plain git: no autogk refspecs on it
    info = json.loads(autogk_in(project, "doctor", "--json", check=False).stdout)
    assert info["project"]["remotes_without_notes"] == ["hub"]
    assert any("remote hub" in w and "autogk remote setup hub" in w for w in info["warnings"])
    autogk_in(project, "remote", "setup", "hub")
    info = json.loads(autogk_in(project, "doctor", "--json", check=False).stdout)
    assert info["project"]["remotes_without_notes"] == [] and not any("remote hub" in w for w in info["warnings"])
