"""The anthropic agent's tools: paths are judged after following links, and no call can crash the loop."""
from __future__ import annotations

import itertools
import os

from autogk_git.agents import tools
from autogk_git.agents.anthropic_agent import AnthropicAgent
from autogk_git.agents.base import Context
from autogk_git.project import Project

KERNEL = "kernels/scale/kernel.py"


def handlers(root):
    p = Project(root)
    t = p.target("scale")
    ctx = Context(worktree=root, target=t, number=1, history=[], config=p.config,
                  check=lambda wt: {"correct": True})
    box = tools.Sandbox(root, t.rel, list(t.editable), ["docs/*.md"])
    return AnthropicAgent(p.config)._handlers(ctx, box), box


def test_git_dir_through_a_link_in_the_target_is_refused(project):
    h, box = handlers(project)
    (project / "kernels/scale/g").symlink_to(project / ".git")
    (project / "kernels/scale/cfg.txt").symlink_to(project / ".git" / "config")
    (project / "kernels/scale/toml.txt").symlink_to(project / ".autogk.toml")
    for path in ("kernels/scale/g/config", "kernels/scale/cfg.txt", "kernels/scale/toml.txt"):
        content, err = tools.dispatch(h, "read_file", {"path": path})
        assert err and "not allowed" in content, (path, content)
    content, err = tools.dispatch(h, "list_files", {})
    assert not err and "cfg.txt" not in content and "config" not in content


def test_an_editable_name_linking_to_a_readable_file_is_not_writable(project):
    h, box = handlers(project)
    box.editable.append("helper.py")
    (project / "kernels/scale/helper.py").symlink_to(project / "kernels/scale/definition.json")
    before = (project / "kernels/scale/definition.json").read_text()
    content, err = tools.dispatch(h, "write_file", {"path": "kernels/scale/helper.py", "content": "{}"})
    assert err and "not allowed" in content
    assert (project / "kernels/scale/definition.json").read_text() == before


def test_no_tool_call_crashes(project):
    """Every tool with every kind of bad argument answers an error (or a result), never raises."""
    h, box = handlers(project)
    kernel = (project / KERNEL).read_text()
    bad_values = [None, 0, -1, 3.5, True, [], ["a"], {}, {"a": 1}, "", " ", "\0", "a\nb", "x" * 300,
                  "kernels/scale/" + "k" * 300 + ".py", "/" * 300, "a/" * 600, "../" * 50, "~", "é" * 200,
                  "kernels/scale/kernel.py\0.txt", "kernels/scale/", ".", "kernels//scale///kernel.py"]
    fields = {"read_file": ["path"], "write_file": ["path", "content"], "edit_file": ["path", "old", "new"],
              "history": ["last"], "read_artifact": ["name"], "list_files": []}
    calls = 0
    for name, keys in fields.items():
        for missing in range(len(keys) + 1):  # each field missing in turn, then none missing
            for value in bad_values:
                args = {k: value for i, k in enumerate(keys) if i != missing}
                content, err = tools.dispatch(h, name, args)
                assert isinstance(content, str) and isinstance(err, bool)
                calls += 1
    for args in (None, [], "path", 5, {"path": KERNEL, "extra": object()}):
        content, err = tools.dispatch(h, "read_file", args)
        assert isinstance(content, str)
        calls += 1
    assert calls > 300
    # A 300-character path is an error the model reads, not an OSError.
    content, err = tools.dispatch(h, "write_file", {"path": "kernels/scale/" + "k" * 300, "content": "x"})
    assert err and "too long" in content
    # None of it changed the kernel (no value above names it with valid content and old/new).
    assert (project / KERNEL).read_text() == kernel
    assert not any(p.is_file() and p.name.startswith("kkk") for p in (project / "kernels/scale").iterdir())


def test_os_errors_from_the_filesystem_are_tool_errors(project):
    h, box = handlers(project)
    (project / "kernels/scale/kernel.py").unlink()
    (project / "kernels/scale/kernel.py").mkdir()
    content, err = tools.dispatch(h, "write_file", {"path": KERNEL, "content": "x"})
    assert err and content.startswith("error")
    os.rmdir(project / "kernels/scale/kernel.py")
