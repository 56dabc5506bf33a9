from __future__ import annotations

import json

from conftest import autogk


def test_doctor_reports_packages_project_and_backend(project):
    out = autogk(project, "doctor", "--json", check=False)
    info = json.loads(out.stdout)
    assert info["packages"]["torch"] and info["packages"]["triton"]
    assert info["project"]["trunk"] == "main"
    assert info["project"]["hooks"] == {"post-commit": "installed", "pre-commit": "installed"}
    assert info["project"]["targets"]["scale"]["workloads"] == 5
    assert info["anthropic_api_key"] is False
    assert out.returncode == (1 if info["problems"] else 0)


def test_doctor_outside_a_project_says_so(tmp_path):
    out = autogk(tmp_path, "doctor", check=False)
    assert "no project here" in out.stdout
