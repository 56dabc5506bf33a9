"""The package's layering, checked from its source (the way import-linter would, without the dependency).

Each module belongs to one layer; a module may import its own layer and the layers below it, never one
above; the import graph has no circle; only `git/` starts git processes; ref and note names are spelled
only in `record/refs.py`; a target's folder is built only in `project.py`; no command imports another;
the worker's files import nothing of the package; no name is used that is never defined.
"""
from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "autogk_git"

# Top to bottom. A module's layer is that of the longest prefix listed here.
LAYERS = [
    ("entry", ["autogk_git.cli", "autogk_git.hook", "autogk_git.__main__"]),
    ("commands", ["autogk_git.commands"]),
    ("review", ["autogk_git.review"]),
    ("loop", ["autogk_git.loop"]),
    ("agents", ["autogk_git.agents"]),
    ("bench", ["autogk_git.bench"]),
    ("tracking", ["autogk_git.tracking"]),
    ("record", ["autogk_git.record"]),
    ("project", ["autogk_git.project", "autogk_git.scaffold"]),
    ("git", ["autogk_git.git"]),
    ("ground", ["autogk_git.config", "autogk_git.env", "autogk_git.errors", "autogk_git.files", "autogk_git.tunables", "autogk_git.fib",
                "autogk_git.examples", "autogk_git.resources", "autogk_git",
                # A leaf (the standard library's enum only, in packages whose __init__ imports nothing),
                # shipped with the judge and read by every layer that reads a result: one Status for all.
                "autogk_git.bench.judge.status"]),
]
# The judge's package runs on the benchmark machine: the standard library, torch, triton, safetensors only.
JUDGE = PKG / "bench" / "judge"
WORKER_ALLOWED = {"torch", "triton", "safetensors", "numpy"}
# What a kernel's own process may import of the judge: how to call and time it, never how it is judged.
KERNEL_PROCESS_MAY_IMPORT = {"kernel_process", "calls", "seal", "sandbox", "timer", "l2", "held", "hygiene", "stats", "status",
                             "launch", "profiling", "interp"}


def modules() -> dict[str, Path]:
    out = {}
    for p in sorted(PKG.rglob("*.py")):
        rel = p.relative_to(PKG.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if "examples" in parts[1:2] and len(parts) > 2:
            continue  # kernels and generators of bundled targets: not the package's code
        out[".".join(parts)] = p
    return out


def layer_of(module: str) -> int:
    best, best_len = None, -1
    for i, (_, prefixes) in enumerate(LAYERS):
        for pre in prefixes:
            if (module == pre or module.startswith(pre + ".")) and len(pre) > best_len:
                best, best_len = i, len(pre)
    assert best is not None, f"{module} is in no layer: add it to LAYERS"
    return best


def imports(path: Path, module: str, known: set[str]) -> set[str]:
    """Package modules imported anywhere in the file (lazy imports inside functions too)."""
    tree = ast.parse(path.read_text())
    found = set()
    pkg = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            # `from pkg import submodule` needs the submodule, not pkg's own code.
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        for n in names:
            while n and n not in known:
                n = n.rsplit(".", 1)[0] if "." in n else ""
            if n and n != module and n != "autogk_git":
                found.add(n)
    return found


def graph() -> dict[str, set[str]]:
    mods = modules()
    return {m: imports(p, m, set(mods)) for m, p in mods.items()}


def test_no_import_runs_up_a_layer():
    bad = []
    for m, deps in graph().items():
        for d in deps:
            if layer_of(d) < layer_of(m):
                bad.append(f"{m} ({LAYERS[layer_of(m)][0]}) imports {d} ({LAYERS[layer_of(d)][0]})")
    assert not bad, "imports that run up a layer:\n" + "\n".join(sorted(bad))


def test_the_status_module_stays_a_leaf_every_layer_may_import():
    # As ground, status.py may import nothing of the package (test_no_import_runs_up_a_layer); the
    # packages it sits in must import nothing either, or `import ...judge.status` would load them too.
    assert graph()["autogk_git.bench.judge.status"] == set()
    for init in (PKG / "bench" / "__init__.py", JUDGE / "__init__.py"):
        found = [n.lineno for n in ast.parse(init.read_text()).body if isinstance(n, ast.Import)
                 or (isinstance(n, ast.ImportFrom) and n.module != "__future__")]
        assert not found, f"{init.relative_to(PKG.parent)} imports (lines {found}): bench/judge/status.py is no leaf then"


def test_import_graph_has_no_circle():
    g = graph()
    state: dict[str, int] = {}
    stack: list[str] = []
    circles = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for d in sorted(g.get(m, ())):
            if state.get(d) == 1:
                circles.append(" -> ".join(stack[stack.index(d):] + [d]))
            elif d not in state:
                visit(d)
        stack.pop()
        state[m] = 2

    for m in sorted(g):
        if m not in state:
            visit(m)
    assert not circles, "circles in the import graph:\n" + "\n".join(circles)


def _starts_git(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    f = node.func
    name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
    if name not in {"run", "Popen", "call", "check_call", "check_output", "execvp", "spawnlp"}:
        return False
    first = node.args[0] if node.args else None
    return (isinstance(first, (ast.List, ast.Tuple)) and first.elts and isinstance(first.elts[0], ast.Constant)
            and first.elts[0].value == "git")


def test_only_the_git_package_starts_git():
    bad = []
    for m, p in modules().items():
        if m.startswith("autogk_git.git."):
            continue
        for node in ast.walk(ast.parse(p.read_text())):
            if _starts_git(node):
                bad.append(f"{p.relative_to(PKG.parent)}:{node.lineno}")
    assert not bad, "git started outside autogk_git/git/ (use git.run.git or git_proc):\n" + "\n".join(bad)


# The runners of git/run.py. A "raw git command line" is a call of one of them, however imported (a name
# from `autogk_git.git.run`, aliased or not, or `run.git(...)` on the module): the caller spells git's
# arguments itself instead of asking a named verb of git/.
RUNNERS = {"git", "git_ok", "git_proc"}
# Files still allowed raw command lines, each at exactly its count (117 lines in 20 modules before git/ had
# its verbs; 18, all in loop/experiment.py, until its opening, committing, merging and closing of an
# experiment moved to git/ too). None now: every module outside git/ asks a named verb. A ceiling above
# its file's count fails too, so a line moved to git/ is not room for a new raw one.
RAW_GIT_ALLOWED: dict[str, int] = {}


def raw_git_calls(path: Path) -> list[int]:
    """Line numbers of the raw git command lines in one file."""
    tree = ast.parse(path.read_text())
    names, mods = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "autogk_git.git.run":
            names |= {a.asname or a.name for a in node.names if a.name in RUNNERS}
        elif isinstance(node, ast.ImportFrom) and node.module == "autogk_git.git":
            mods |= {a.asname or a.name for a in node.names if a.name == "run"}
        elif isinstance(node, ast.Import):
            mods |= {a.asname for a in node.names if a.name == "autogk_git.git.run" and a.asname}
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if (isinstance(f, ast.Name) and f.id in names) or (
                isinstance(f, ast.Attribute) and f.attr in RUNNERS and isinstance(f.value, ast.Name)
                and f.value.id in mods):
            lines.append(node.lineno)
    return sorted(lines)


def test_git_is_spoken_in_named_verbs_outside_the_git_package():
    bad = []
    for m, p in modules().items():
        if m.startswith("autogk_git.git."):
            continue
        rel = str(p.relative_to(PKG.parent))
        found = raw_git_calls(p)
        if len(found) > RAW_GIT_ALLOWED.get(rel, 0):
            bad.append(f"{rel}: {len(found)} raw git command lines (allowed {RAW_GIT_ALLOWED.get(rel, 0)}), "
                       f"lines {', '.join(map(str, found))}")
    assert not bad, ("git asked with a raw command line outside autogk_git/git/ (name the verb in git/ "
                     "and call it):\n" + "\n".join(bad))


def test_each_raw_git_ceiling_is_its_files_count_today():
    stale = [f"{rel}: allowed {n}, has {len(raw_git_calls(PKG.parent / rel))}" for rel, n in RAW_GIT_ALLOWED.items()
             if len(raw_git_calls(PKG.parent / rel)) < n]
    assert not stale, ("lower RAW_GIT_ALLOWED in tests/test_architecture.py to the file's count (0: remove its "
                       "entry):\n" + "\n".join(stale))


def test_the_verb_check_sees_raw_calls_however_imported(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("from autogk_git.git.run import git as g, git_proc\nfrom autogk_git.git import run\n"
                 "g('status', cwd='.')\ngit_proc('log', cwd='.')\nrun.git_ok('diff', cwd='.')\n"
                 "from autogk_git.git import repo\nrepo.rev('.', 'HEAD')\n")
    assert raw_git_calls(f) == [3, 4, 5]


def test_the_architecture_check_sees_a_raw_git_call():
    tree = ast.parse('import subprocess\nsubprocess.run(["git", "status"], cwd=".")\n')
    assert any(_starts_git(n) for n in ast.walk(tree))


def test_ref_names_live_in_record_refs():
    pattern = re.compile(r"""["'](refs/(notes|autogk|heads)/|refs/notes/)""")
    bad = []
    for m, p in modules().items():
        if m == "autogk_git.record.refs":
            continue
        for i, line in enumerate(p.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            if pattern.search(code) and not code.strip().startswith(('"""', "`")):
                bad.append(f"{p.relative_to(PKG.parent)}:{i}: {line.strip()}")
    assert not bad, "ref names spelled outside record/refs.py:\n" + "\n".join(bad)


# Where a target's folder is named. project.py is the one module that knows it; the judge's package names
# its own temp folder of kernel processes "kernels" too, and never sees a project.
TARGET_FOLDER_ALLOWED = ("autogk_git.project", "autogk_git.bench.judge")
TARGETS_DEFAULT = "kernels"  # [project] targets' default (config.py)
_JOINS = {"Path", "PurePath", "PurePosixPath", "joinpath", "join"}


def _names_targets_folder(c: ast.Constant) -> bool:
    return isinstance(c.value, str) and (c.value == TARGETS_DEFAULT or c.value.startswith(TARGETS_DEFAULT + "/"))


def target_folder_builds(path: Path) -> list[str]:
    """Lines of one file that build a target's folder themselves instead of asking project.py: the
    literal targets folder joined into a path (`root / "kernels" / name`, `f"kernels/{name}"`,
    `"kernels/" + name`, `Path("kernels", name)`), the config key that names the folder read
    (`cfg.project.targets`, `SCHEMA["project"]["targets"]`), the Project's `targets_dir`, or a
    Target made by hand (`Target(name, dir, ...)`)."""
    tree = ast.parse(path.read_text())
    parent = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found = []
    for node in ast.walk(tree):
        why = ""
        if isinstance(node, ast.Constant) and _names_targets_folder(node):
            up = parent.get(node)
            if isinstance(up, ast.BinOp) and isinstance(up.op, (ast.Div, ast.Add)):
                why = f"{node.value!r} joined into a path"
            elif isinstance(up, ast.JoinedStr):
                why = f"{node.value!r} in an f-string"
            elif isinstance(up, ast.Call) and node in up.args and \
                    getattr(up.func, "attr", getattr(up.func, "id", "")) in _JOINS:
                why = f"{node.value!r} joined into a path"
        elif isinstance(node, ast.Attribute) and node.attr == "targets" and \
                isinstance(node.value, ast.Attribute) and node.value.attr == "project":
            why = "the [project] targets key read"
        elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and \
                node.slice.value == "targets" and isinstance(node.value, ast.Subscript) and \
                isinstance(node.value.slice, ast.Constant) and node.value.slice.value == "project" and \
                getattr(node.value.value, "attr", getattr(node.value.value, "id", "")) == "SCHEMA":
            why = "the [project] targets key read"
        elif isinstance(node, ast.Attribute) and node.attr == "targets_dir":
            why = "targets_dir read"
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "Target":
            why = "a Target made by hand"
        if why:
            found.append(f"{node.lineno}: {why}")
    return found


def test_target_folders_are_built_only_in_project():
    bad = sorted(f"{p.relative_to(PKG.parent)}:{line}" for m, p in modules().items()
           if not any(m == a or m.startswith(a + ".") for a in TARGET_FOLDER_ALLOWED)
           for line in target_folder_builds(p))
    assert not bad, "a target's folder built outside project.py (ask the Target or Project):\n" + "\n".join(bad)


def test_the_target_folder_check_sees_each_spelling(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("from pathlib import Path\n"
                 "a = root / 'kernels' / name\n"
                 "b = f'kernels/{name}'\n"
                 "c = 'kernels/' + name\n"
                 "d = Path('kernels', name)\n"
                 "e = root / cfg.project.targets / name\n"
                 "g = SCHEMA['project']['targets'].default\n"
                 "h = project.targets_dir / name\n"
                 "i = Target(name, root / t / name)\n"
                 "j = target.dir / 'kernel.py'\n"       # asking the Target: fine
                 "k = project.target_rel(name)\n"      # asking the Project: fine
                 "say('kernels')\n"                    # a word, not a path
                 "out['project']['targets'] = {}\n")   # a report's own keys, not the config's
    assert sorted({int(line.split(":")[0]) for line in target_folder_builds(f)}) == list(range(2, 10))


def command_imports() -> list[str]:
    """Each import of one command's module by another (commands share code through a lower layer)."""
    pre = "autogk_git.commands"
    return sorted(f"{m} imports {d}" for m, deps in graph().items() if m.startswith(pre + ".")
                  for d in deps if d == pre or d.startswith(pre + "."))


def test_no_command_imports_another():
    bad = command_imports()
    assert not bad, ("a command imports another command (move what they share below the commands layer):\n"
                     + "\n".join(bad))


def test_the_command_import_check_sees_a_planted_import(monkeypatch):
    real = imports

    def planted(path, module, known):
        got = real(path, module, known)
        return got | {"autogk_git.commands.bench"} if module == "autogk_git.commands.log" else got
    monkeypatch.setitem(globals(), "imports", planted)
    assert "autogk_git.commands.log imports autogk_git.commands.bench" in command_imports()


def test_worker_files_import_only_what_the_gpu_machine_has():
    import sys
    std = set(sys.stdlib_module_names)
    bad = []
    files = sorted(JUDGE.glob("*.py"))
    assert len(files) >= 10, "the judge's package moved: update JUDGE"
    for p in files:
        rel = p.relative_to(PKG)
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.Import):
                tops = [a.name.split(".")[0] for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                tops = [(node.module or "").split(".")[0]]
            else:
                continue
            for t in tops:
                if t not in std and t not in WORKER_ALLOWED and not t.startswith("autogk_"):
                    bad.append(f"{rel}:{node.lineno}: {t}")
                if t == "autogk_git" or t.startswith("autogk_"):
                    bad.append(f"{rel}:{node.lineno}: imports {t} (the judge's own modules: relative imports only)")
            if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) in (
                    "import_module", "__import__", "spec_from_file_location") and p.name != "calls.py" \
                    and p.name != "launch.py":
                bad.append(f"{rel}:{node.lineno}: imports by name (an arrow no reader sees)")
    assert not bad, "the judge's files must run with torch and triton alone:\n" + "\n".join(bad)


def kernel_process_closure() -> set[str]:
    """The judge's modules a kernel's process loads: kernel_process and what it imports, transitively."""
    g = graph()
    pre = "autogk_git.bench.judge."
    seen, todo = set(), [pre + "kernel_process"]
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        seen.add(m)
        todo += [d for d in g.get(m, ()) if d.startswith(pre)]
    return {m[len(pre):] for m in seen}


def test_the_kernel_process_imports_no_judging_code():
    extra = kernel_process_closure() - KERNEL_PROCESS_MAY_IMPORT
    assert not extra, f"the kernel's process imports judge code it must not hold: {sorted(extra)}"


def test_the_kernel_process_check_sees_a_planted_import(monkeypatch):
    real = imports

    def planted(path, module, known):
        got = real(path, module, known)
        return got | {"autogk_git.bench.judge.checks"} if module.endswith("judge.calls") else got
    monkeypatch.setitem(globals(), "imports", planted)
    assert "checks" in kernel_process_closure()


# Judge modules the kernel's process loads that the seal need not hold: the sandbox is entered once,
# before the kernel's code is imported, and nothing of it runs after.
UNSEALED_OK = {"sandbox"}


def sealed_modules(source: str) -> set[str]:
    """The names seal_process holds as the judge's own modules: the first item of each pair in its
    `for name, mod in ((...), ...)` loop."""
    fn = next(n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef) and n.name == "seal_process")
    out = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.For) and isinstance(node.target, ast.Tuple) and isinstance(node.iter, ast.Tuple):
            out |= {e.elts[0].value for e in node.iter.elts
                    if isinstance(e, ast.Tuple) and e.elts and isinstance(e.elts[0], ast.Constant)}
    return out


def test_every_judge_module_the_kernels_process_loads_is_sealed():
    # A module the kernel's process loads but the seal does not hold can be patched by the kernel with
    # nothing to see: a helper the timer calls through it (the flush, the carve-out check) made to lie.
    unsealed = kernel_process_closure() - UNSEALED_OK - sealed_modules((JUDGE / "seal.py").read_text())
    assert not unsealed, f"the kernel's process loads judge modules the seal does not hold: {sorted(unsealed)}"


def test_the_seal_coverage_check_sees_a_module_left_out():
    source = (JUDGE / "seal.py").read_text()
    assert "l2" in sealed_modules(source)
    assert "l2" not in sealed_modules(source.replace('("l2", l2), ', ""))


def test_the_loops_process_imports_no_torch():
    # `autogk iterate`, the git hooks and `autogk bisect` run in processes that never call a kernel: torch
    # costs each of them ~2.5 CPU-s to import (bench/stages.py once took the workloads' axis values from the
    # judge's stress room, which imports torch).
    code = ("import sys, autogk_git.cli, autogk_git.bench.stages, autogk_git.loop.iterate, autogk_git.hook; "
            "print(sorted(m for m in ('torch', 'triton') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=PKG.parent, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]", out.stdout


def undefined_names(paths: list[Path]) -> list[str]:
    """pyflakes' 'undefined name' reports over these files: a name used but bound nowhere, which Python
    reports only when that line runs (a GPU-only path, an error branch) and the tests here may never reach."""
    import pyflakes.api
    import pyflakes.messages
    import pyflakes.reporter

    class Collect(pyflakes.reporter.Reporter):
        def __init__(self):
            self.found: list[str] = []

        def unexpectedError(self, filename, msg):
            self.found.append(f"{filename}: {msg}")

        def syntaxError(self, filename, msg, lineno, offset, text):
            self.found.append(f"{filename}:{lineno}: {msg}")

        def flake(self, message):
            if isinstance(message, (pyflakes.messages.UndefinedName, pyflakes.messages.UndefinedLocal,
                                    pyflakes.messages.UndefinedExport)):
                self.found.append(str(message))

    rep = Collect()
    for p in paths:
        pyflakes.api.checkPath(str(p), rep)
    return rep.found


def test_no_name_is_used_that_is_never_defined():
    # A constant moved from judge/rounds.py to judge/clock.py without its definition crashed the judge
    # on the cudagraph timer only (the H200, 2026-12-02): nothing on CPU ran that line.
    assert undefined_names(sorted(PKG.rglob("*.py"))) == []


def test_the_undefined_name_check_sees_one(tmp_path):
    bad = tmp_path / "clock.py"
    bad.write_text("def figures(f):\n    return f * PASSES\n")
    assert any("PASSES" in m for m in undefined_names([bad]))


def test_the_undefined_name_check_sees_a_local_read_before_it_is_bound(tmp_path):
    bad = tmp_path / "rounds.py"
    bad.write_text("PASSES = 3\n\ndef figures(f):\n    n = f * PASSES\n    PASSES = 2\n    return n\n")
    assert any("PASSES" in m for m in undefined_names([bad]))
