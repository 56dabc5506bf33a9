from __future__ import annotations

import json

from conftest import autogk_in


def test_doctor_reports_packages_project_and_backend(project):
    out = autogk_in(project, "doctor", "--json", check=False)
    info = json.loads(out.stdout)
    assert info["packages"]["torch"] and info["packages"]["triton"]
    assert info["project"]["trunk"] == "main"
    assert info["project"]["hooks"] == {"post-commit": "installed", "pre-commit": "installed"}
    assert info["project"]["targets"]["scale"]["workloads"] == 5
    assert info["anthropic_api_key"] is False
    # A working project (hooks installed, data present, the CPU backend here) has nothing to report.
    assert info["problems"] == [] and out.returncode == 0


def test_doctor_outside_a_project_says_so(tmp_path):
    out = autogk_in(tmp_path, "doctor", check=False)
    assert "no project here" in out.stdout
