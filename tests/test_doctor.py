from __future__ import annotations

import json
import os

from conftest import BIN, autogk, autogk_in, git


def test_doctor_reports_packages_project_and_backend(project):
    out = autogk_in(project, "doctor", "--json", check=False)
    info = json.loads(out.stdout)
    assert info["packages"]["torch"] and info["packages"]["triton"]
    assert info["project"]["trunk"] == "main"
    assert info["project"]["hooks"] == {"post-commit": "installed", "pre-commit": "installed",
         "reference-transaction": "installed"}
    assert info["project"]["targets"]["scale"]["workloads"] == 5
    assert info["anthropic_api_key"] is False
    assert info["problems"] == [] and out.returncode == 0


def test_doctor_outside_a_project_says_so_and_fails(tmp_path):
    out = autogk_in(tmp_path, "doctor", check=False)
    assert out.returncode == 1
    assert "not an autogk project" in out.stdout and "autogk init" in out.stdout
    assert "all good" not in out.stdout
    info = json.loads(autogk_in(tmp_path, "doctor", "--json", check=False).stdout)
    assert info["project"] is None and any("not an autogk project" in p for p in info["problems"])


def test_missing_hooks_are_a_warning_not_a_problem(project):
    """A fresh clone has no hooks (git never clones them) and the loop runs without them."""
    autogk_in(project, "hooks", "uninstall")
    out = autogk_in(project, "doctor", check=False)
    assert out.returncode == 0, out.stdout
    assert "problem:" not in out.stdout
    assert "warning: hooks are not installed" in out.stdout and "autogk hooks install" in out.stdout
    info = json.loads(autogk_in(project, "doctor", "--json").stdout)
    assert info["problems"] == [] and any("hooks" in w for w in info["warnings"])


def test_readable_output_has_no_python_dicts(project):
    out = autogk_in(project, "doctor").stdout
    assert "{" not in out and "'" not in out.replace("`", "")
    assert "target scale: 5 workload(s) in kernels/scale/" in out
    assert "hooks installed" in out
    assert out.rstrip().splitlines()[-1].startswith("all good")


def test_a_broken_target_is_a_problem_with_exit_1(project):
    (project / "kernels/scale/definition.json").write_text("{ not json")
    git(project, "commit", "-qam", "break the definition")
    out = autogk_in(project, "doctor", check=False)
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


def test_doctor_lists_setups_iterate_would_trip_on_and_fails(project):
    good = (project / ".autogk.toml").read_text()
    for text, words in (('[project]\ntarget = "nope"\n', "[project] target = 'nope' is not a target"),
                        ('[agent]\nkind = "command"\ncommand = "no-such-cli -p"\n', "'no-such-cli', which is not on PATH"),
                        ('[agent]\nkind = "command"\ncommand = "claude -p \\"oops"\n', "quotes are balanced"),
                        ("[bench]\nmin_rounds = 50\nmax_rounds = 10\n", "min_rounds = 50 is over max_rounds = 10"),
                        ("[agent]\neditable = []\n", "[agent] editable = []")):
        (project / ".autogk.toml").write_text(text)
        out = autogk_in(project, "doctor", check=False)
        assert out.returncode == 1, text
        assert f"problem: " in out.stdout and words in out.stdout, out.stdout + out.stderr
    (project / ".autogk.toml").write_text(good)
    # A definition renamed away, and a reference that returns the wrong shape, on the trunk.
    git(project, "mv", "kernels/scale/definition.json", "kernels/scale/definition.json.bak")
    out = autogk_in(project, "doctor", check=False)
    assert out.returncode == 1 and "kernels/scale/ has no definition.json" in out.stdout
    git(project, "mv", "kernels/scale/definition.json.bak", "kernels/scale/definition.json")
    d = json.loads((project / "kernels/scale/definition.json").read_text())
    d["reference"] = "def run(x, bias, scale):\n    return x[:2]\n"
    (project / "kernels/scale/definition.json").write_text(json.dumps(d))
    git(project, "commit", "-qam", "a broken reference", "--no-verify")
    out = autogk_in(project, "doctor", check=False)
    assert out.returncode == 1
    assert "main:kernels/scale/definition.json: the reference's output out has shape [2]" in out.stdout


def test_a_tracking_server_that_refuses_is_said_in_seconds(project):
    import time
    dead = {"AUTOGK_TRACKING_URI": "http://127.0.0.1:9/"}
    for cmd in ("sync", "doctor"):
        t0 = time.monotonic()
        out = autogk(project, cmd, check=False, env=dead, timeout=120)
        assert time.monotonic() - t0 < 60, f"{cmd} took {time.monotonic() - t0:.0f} s"
        text = out.stdout + out.stderr
        assert out.returncode == 1 and "the MLflow store http://127.0.0.1:9/ does not answer" in text, text
        assert "Traceback" not in text
