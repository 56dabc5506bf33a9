"""Malformed `.autogk.toml`, definitions and workloads: a clear error (exit 1, a message naming the file or
key and a hint), never a traceback, and nothing written (no commit, ref, note, file or folder).

The cases are generated: each valid file is broken in many ways (wrong types at every key, missing keys,
bad encodings, bad syntax), and the real CLI entry point runs in-process on each one."""
from __future__ import annotations

import copy
import json
import os
import random
import sys
from pathlib import Path

import pytest

from conftest import DATA, git

from autogk_git import cli, config

TARGET = "kernels/scale"
WRONG = [None, True, -1, 0, 2.5, "", "text", [], ["a"], {}, {"k": 1}, 10**30]


def run_cli(monkeypatch, capsys, cwd: Path, *args: str) -> tuple[int, str]:
    monkeypatch.chdir(cwd)
    monkeypatch.setattr(sys, "argv", ["autogk", *args])
    with pytest.raises(SystemExit) as e:
        cli.main()
    out = capsys.readouterr()
    return e.value.code, out.out + out.err


def state(root: Path) -> tuple:
    """What a command could write: refs, the index and working tree, autogk's state folder."""
    files = sorted(str(p.relative_to(root)) for p in (root / ".git" / "autogk").rglob("*")) \
        if (root / ".git" / "autogk").exists() else []
    return (git(root, "for-each-ref", "--format=%(refname) %(objectname)"), git(root, "ls-files", "-s"),
            git(root, "status", "--porcelain", "--untracked-files=all", "--ignored"), files)


# ------------------------------------------------------------------------------------------------
# Generators
# ------------------------------------------------------------------------------------------------

def config_cases(good: str) -> list[tuple[str, bytes]]:
    cases: list[tuple[str, bytes]] = []
    for section, keys in config.SCHEMA.items():
        for key, spec in keys.items():
            if f"AUTOGK_{section.upper()}_{key.upper()}" in os.environ:
                continue  # the environment overrides this key (the test's own settings)
            for v in WRONG:
                if _accepts(spec, v):
                    continue
                lit = json.dumps(v) if not isinstance(v, bool) else str(v).lower()
                if v is None:
                    lit = "nan"
                if isinstance(v, dict):
                    lit = "{ " + ", ".join(f"{k} = {x}" for k, x in v.items()) + " }"
                cases.append((f"[{section}] {key} = {lit}", f"[{section}]\n{key} = {lit}\n".encode()))
    cases += [
        ("reps absurd", b"[bench]\nreps = 30000000\n"),
        ("reps inf", b"[bench]\nreps = inf\n"),
        ("min_effect nan", b"[bench]\nmin_effect = nan\n"),
        ("latin-1", "[project]\ntrunk = \"m\xe4in\"\n".encode("latin-1")),
        ("utf-16", "[bench]\nreps = 3\n".encode("utf-16")),
        ("binary", bytes(range(256))),
        ("bad syntax", b"[bench\nreps = 3\n"),
        ("dup table", b"[bench]\n[bench]\n"),
        ("dup key", b"[bench]\nreps = 1\nreps = 2\n"),
        ("unknown section", b"[benchmark]\nreps = 3\n"),
        ("unknown key", b"[bench]\nrep = 3\n"),
        ("section not a table", b"bench = 3\n"),
        ("top-level key", b"reps = 3\n"),
        ("unterminated string", b"[project]\ntrunk = \"main\n"),
        ("deep nesting", b"[agent]\nprices = " + b"[" * 5000 + b"]" * 5000 + b"\n"),
    ]
    rnd = random.Random(11)
    for i in range(20):  # a valid file cut, or with one byte replaced by a non-UTF-8 one
        cut = rnd.randrange(1, len(good))
        cases.append((f"cut+garbage {i}", good.encode()[:cut] + b"\xff\xfe[[=" + good.encode()[cut:]))
    return cases


def _accepts(spec: config.Key, v) -> bool:
    try:
        config._coerce("s", "k", spec, v, "w")
        return True
    except config.ConfigError:
        return False


def definition_cases(good: dict) -> list[tuple[str, bytes]]:
    cases: list[tuple[str, bytes]] = []

    def case(name: str, mutate) -> None:
        d = copy.deepcopy(good)
        mutate(d)
        cases.append((name, json.dumps(d).encode()))

    for key in ("name", "axes", "inputs", "outputs", "reference"):
        case(f"no {key}", lambda d, k=key: d.pop(k))
        for v in WRONG:
            if key == "name" and isinstance(v, str) and v:
                continue
            if key in ("inputs",) and v == {}:
                continue
            case(f"{key} = {v!r:.20}", lambda d, k=key, v=v: d.__setitem__(k, copy.deepcopy(v)))
    for v in WRONG:
        case(f"axis n = {v!r:.20}", lambda d, v=v: d["axes"].__setitem__("n", copy.deepcopy(v)))
        case(f"input x = {v!r:.20}", lambda d, v=v: d["inputs"].__setitem__("x", copy.deepcopy(v)))
        if v is not None and v != []:  # null: a scalar; []: a 0-d tensor
            case(f"shape = {v!r:.20}", lambda d, v=v: d["inputs"]["x"].__setitem__("shape", copy.deepcopy(v)))
        case(f"dtype = {v!r:.20}", lambda d, v=v: d["outputs"]["out"].__setitem__("dtype", copy.deepcopy(v)))
    case("const axis without value", lambda d: d["axes"].__setitem__("h", {"type": "const"}))
    case("const axis string value", lambda d: d["axes"].__setitem__("h", {"type": "const", "value": "4096"}))
    case("axis type other", lambda d: d["axes"].__setitem__("n", {"type": "variable"}))
    case("shape names unknown axis", lambda d: d["inputs"]["x"].__setitem__("shape", ["m"]))
    case("shape holds a number", lambda d: d["inputs"]["x"].__setitem__("shape", [4096]))
    case("reference without run", lambda d: d.__setitem__("reference", "def forward(x):\n    return x\n"))
    case("inputs as a list", lambda d: d.__setitem__("inputs", [{"name": "x"}]))
    cases += [("not JSON", b"{\"name\": \"scale\","), ("JSON array", b"[1, 2]"), ("JSON string", b"\"scale\""),
              ("empty", b""), ("latin-1", "{\"name\": \"sc\xe4le\"}".encode("latin-1")),
              ("deep nesting", b"[" * 100000 + b"]" * 100000)]
    return cases


def workload_cases(good_lines: list[dict]) -> list[tuple[str, bytes]]:
    cases: list[tuple[str, bytes]] = []
    line = good_lines[0]

    def case(name: str, mutate) -> None:
        obj = copy.deepcopy(line)
        mutate(obj)
        body = [json.dumps(obj)] + [json.dumps(x) for x in good_lines[1:]]
        cases.append((name, ("\n".join(body) + "\n").encode()))

    for v in WRONG:
        case(f"workload = {v!r:.20}", lambda o, v=v: o.__setitem__("workload", copy.deepcopy(v)))
        if not (isinstance(v, str) and v):
            case(f"uuid = {v!r:.20}", lambda o, v=v: o["workload"].__setitem__("uuid", copy.deepcopy(v)))
        case(f"axes = {v!r:.20}", lambda o, v=v: o["workload"].__setitem__("axes", copy.deepcopy(v)))
        if not (isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 1 << 40):
            case(f"axis n = {v!r:.20}", lambda o, v=v: o["workload"]["axes"].__setitem__("n", copy.deepcopy(v)))
        if not isinstance(v, dict):
            case(f"inputs = {v!r:.20}", lambda o, v=v: o["workload"].__setitem__("inputs", copy.deepcopy(v)))
            case(f"input x = {v!r:.20}", lambda o, v=v: o["workload"]["inputs"].__setitem__("x", copy.deepcopy(v)))
    case("no uuid", lambda o: o["workload"].pop("uuid"))
    case("no axes", lambda o: o["workload"].pop("axes"))
    case("axis n missing", lambda o: o["workload"]["axes"].pop("n"))
    text = "".join(json.dumps(x) + "\n" for x in good_lines)
    cases += [("not JSON", text.encode() + b"{\"workload\": \n"), ("array line", b"[1,2]\n" + text.encode()),
              ("number line", b"42\n"), ("string line", b"\"w\"\n"), ("empty", b""), ("blank lines", b"\n\n  \n"),
              ("latin-1", text.encode() + "{\"w\": \"\xe4\"}\n".encode("latin-1")),
              ("null line", b"null\n"), ("deep nesting", b"[" * 100000 + b"]" * 100000 + b"\n")]
    return cases


# ------------------------------------------------------------------------------------------------
# The test
# ------------------------------------------------------------------------------------------------

@pytest.mark.slow(17)  # ~1,160 cases of git and CLI calls: started first, not left to the end
def test_malformed_inputs_are_clear_errors_and_write_nothing(project, monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("AUTOGK_BENCH_BACKEND", "interpret")
    monkeypatch.setenv("AUTOGK_TRACKING_ENABLED", "false")
    monkeypatch.delenv("AUTOGK_BENCH_HOOK_MODE")
    good_cfg = (project / ".autogk.toml").read_text()
    good_def = json.loads((project / TARGET / "definition.json").read_text())
    good_wls = [json.loads(x) for x in (project / TARGET / "workloads.jsonl").read_text().splitlines() if x.strip()]
    suites = [(".autogk.toml", project / ".autogk.toml", config_cases(good_cfg)),
              ("definition.json", project / TARGET / "definition.json", definition_cases(good_def)),
              ("workloads.jsonl", project / TARGET / "workloads.jsonl", workload_cases(good_wls))]
    before = state(project)
    total, failures = 0, []
    for what, path, cases in suites:
        original = path.read_bytes()
        for name, data in cases:
            total += 1
            path.write_bytes(data)
            rc, out = run_cli(monkeypatch, capsys, project, "bench", "--target", "scale")
            path.write_bytes(original)
            problems = []
            if rc != 1:
                problems.append(f"exit {rc}")
            if "Traceback" in out or "crashed" in out:
                problems.append("traceback")
            if "error:" not in out or "hint:" not in out:
                problems.append("no error and hint")
            elif what == ".autogk.toml" and ".autogk.toml" not in out and "AUTOGK_" not in out:
                problems.append("does not name the file")
            elif what != ".autogk.toml" and what not in out:
                problems.append("does not name the file")
            if state(project) != before:
                problems.append("wrote something")
                before = state(project)
            if problems:
                failures.append(f"{what} / {name}: {', '.join(problems)}: {out.strip()[-300:]}")
    assert total >= 200
    assert not failures, f"{len(failures)} of {total} cases:\n" + "\n".join(f[:400] for f in failures[:60])


def test_init_with_malformed_files_creates_nothing(monkeypatch, capsys, tmp_path):
    good_def = json.loads((DATA / "scale" / "definition.json").read_text())
    good_wls = [json.loads(x) for x in (DATA / "scale" / "workloads.jsonl").read_text().splitlines() if x.strip()]
    cases = [("definition", n, d) for n, d in definition_cases(good_def)][::3] + \
            [("workloads", n, d) for n, d in workload_cases(good_wls)][::3]
    failures = []
    for i, (kind, name, data) in enumerate(cases):
        d, w = tmp_path / f"def{i}.json", tmp_path / f"wl{i}.jsonl"
        d.write_bytes(data if kind == "definition" else json.dumps(good_def).encode())
        w.write_bytes(data if kind == "workloads" else (DATA / "scale" / "workloads.jsonl").read_bytes())
        dest = tmp_path / f"proj{i}"
        rc, out = run_cli(monkeypatch, capsys, tmp_path, "init", str(dest), "--definition", str(d),
                          "--workloads", str(w), "--no-check")
        if rc != 1 or "Traceback" in out or "hint:" not in out or dest.exists():
            failures.append(f"{kind} / {name}: exit {rc}, exists={dest.exists()}: {out.strip()[-300:]}")
    assert len(cases) > 30
    assert not failures, "\n".join(failures[:20])


# ------------------------------------------------------------------------------------------------
# Second pass: special files, references, workloads against their definition, setups doctor must
# catch. Most cases run in-process (the library functions the commands call); a handful run the real
# `autogk` where the process is the point (a reference that ends its process or never returns).
# ------------------------------------------------------------------------------------------------

import signal
import subprocess
import time

from conftest import autogk

HANG_S = 30  # a case that takes this long is counted as a hang (each should take milliseconds)


class Tally:
    """clean / traceback / wrongly accepted / hang, with the failing cases for the assertion."""

    def __init__(self) -> None:
        self.counts = {"clean": 0, "traceback": 0, "wrongly accepted": 0, "hang": 0, "unclear": 0}
        self.failures: list[str] = []

    def add(self, kind: str, name: str, detail: str = "") -> None:
        self.counts[kind] += 1
        if kind != "clean":
            self.failures.append(f"{kind}: {name}: {detail[-300:]}")

    @property
    def total(self) -> int:
        return sum(self.counts.values())


class _Hang(Exception):
    pass


def _alarm(signum, frame):  # noqa: ARG001
    raise _Hang()


def judge_case(tally: Tally, name: str, fn, names: tuple[str, ...]) -> None:
    """Run fn (a refusal is an AutogkError whose text names one of `names`), under a hang watchdog."""
    from autogk_git.errors import AutogkError
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(HANG_S)
    try:
        fn()
        tally.add("wrongly accepted", name)
    except _Hang:
        tally.add("hang", name)
    except AutogkError as e:
        text = str(e)
        if "Traceback" in text or 'File "' in text:
            tally.add("traceback", name, text)
        elif not e.hint or not any(n in text for n in names):
            tally.add("unclear", name, text)
        else:
            tally.add("clean", name)
    except Exception as e:  # noqa: BLE001 - a crash: what a user sees as a traceback
        tally.add("traceback", name, f"{type(e).__name__}: {e}")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def special_files(tmp: Path) -> list[tuple[str, Path]]:
    """Paths that are not regular files, or are far too big: each must be refused by type or size."""
    tmp.mkdir(parents=True, exist_ok=True)
    fifo = tmp / "fifo"
    os.mkfifo(fifo)
    (tmp / "loop-a").symlink_to(tmp / "loop-b")
    (tmp / "loop-b").symlink_to(tmp / "loop-a")
    (tmp / "to-zero").symlink_to("/dev/zero")
    (tmp / "to-fifo").symlink_to(fifo)
    (tmp / "folder").mkdir()
    huge = tmp / "huge"
    with open(huge, "wb") as f:  # sparse: no disk used, but 65 MiB by its size
        f.truncate(65 << 20)
    return [("fifo", fifo), ("symlink loop", tmp / "loop-a"), ("/dev/zero", Path("/dev/zero")),
            ("symlink to /dev/zero", tmp / "to-zero"), ("symlink to a fifo", tmp / "to-fifo"),
            ("folder", tmp / "folder"), ("/dev/null", Path("/dev/null")), ("65 MiB file", huge)]


REFERENCES = {  # name -> reference source for the `scale` definition (one output: out [n] float32)
    "too short": "def run(x, bias, scale):\n    return x[:-1] * scale + bias[:-1]\n",
    "extra dim": "def run(x, bias, scale):\n    return (x * scale + bias).unsqueeze(0)\n",
    "2-d": "def run(x, bias, scale):\n    return (x * scale + bias).reshape(1, -1).expand(2, -1)\n",
    "empty": "import torch\ndef run(x, bias, scale):\n    return torch.empty(0)\n",
    "float64": "def run(x, bias, scale):\n    return (x * scale + bias).double()\n",
    "float16": "def run(x, bias, scale):\n    return (x * scale + bias).half()\n",
    "bfloat16": "import torch\ndef run(x, bias, scale):\n    return (x * scale + bias).to(torch.bfloat16)\n",
    "int32": "import torch\ndef run(x, bias, scale):\n    return (x * scale + bias).to(torch.int32)\n",
    "None": "def run(x, bias, scale):\n    x * scale + bias\n",
    "two outputs": "def run(x, bias, scale):\n    return x * scale + bias, x\n",
    "empty tuple": "def run(x, bias, scale):\n    return ()\n",
    "a string": "def run(x, bias, scale):\n    return 'out'\n",
    "a number": "def run(x, bias, scale):\n    return 3.0\n",
    "a list of floats": "def run(x, bias, scale):\n    return [[1.0, 2.0]]\n",
    "NaN": "def run(x, bias, scale):\n    return x * float('nan')\n",
    "one NaN": "import torch\ndef run(x, bias, scale):\n    y = x * scale + bias\n    y[0] = float('nan')\n    return y\n",
    "inf everywhere": "def run(x, bias, scale):\n    return x * 0 + float('inf')\n",
    "unseeded random": "import torch\ndef run(x, bias, scale):\n    return torch.rand_like(x)\n",
    "keeps state": "import torch\nN = [0]\ndef run(x, bias, scale):\n    N[0] += 1\n    return x * N[0]\n",
    "raises": "def run(x, bias, scale):\n    raise ValueError('bad input')\n",
    "asserts": "def run(x, bias, scale):\n    assert x.shape[0] == 4096\n    return x\n",
    "missing module": "import no_such_module_anywhere\ndef run(x, bias, scale):\n    return x\n",
    "syntax error": "def run(x, bias, scale):\n    return x +\n",
    "wrong arity": "def run(x):\n    return x\n",
    "recursion": "def run(x, bias, scale):\n    return run(x, bias, scale)\n",
    "sys.exit": "import sys\ndef run(x, bias, scale):\n    sys.exit(0)\n",
    "raises at import": "raise RuntimeError('no')\ndef run(x, bias, scale):\n    return x\n",
    "no run at import": "run = None\ndef run_(x):\n    pass\n# def run(\n",
}


def workload_semantic_cases(good: list[dict]) -> list[tuple[str, str]]:
    """Workload files (JSONL text) wrong for the `scale` definition, though each line is well-formed."""
    out = []

    def with_line(name: str, mutate) -> None:
        lines = copy.deepcopy(good)
        mutate(lines)
        out.append((name, "".join(json.dumps(x) + "\n" for x in lines)))

    for axis in ("m", "N", "n ", "batch", "h", "x"):
        with_line(f"unknown axis {axis!r}", lambda ls, a=axis: ls[1]["workload"]["axes"].__setitem__(a, 4))
    for inp in ("y", "X", "scales", "out", "bias2", ""):
        with_line(f"unknown input {inp!r}", lambda ls, i=inp: ls[0]["workload"]["inputs"].__setitem__(i, {"type": "random"}))
    for kind in ("randn", "blob", "tensor", "RANDOM", "", "zeros"):
        with_line(f"input type {kind!r}", lambda ls, k=kind: ls[0]["workload"]["inputs"].__setitem__("x", {"type": k}))
    for v in (None, "1.5", True, [1.5], {"v": 1}):
        with_line(f"scalar value {v!r:.12}", lambda ls, v=v: ls[0]["workload"]["inputs"].__setitem__(
            "scale", {"type": "scalar", "value": v}))
    for i in (0, 1, len(good) - 1):
        with_line(f"duplicate uuid of line {i + 1}", lambda ls, i=i: ls.append(copy.deepcopy(ls[i])))
    for n in (129, 1000, 100_000, 10 << 20):
        with_line(f"uuid of {n} chars", lambda ls, n=n: ls[0]["workload"].__setitem__("uuid", "u" * n))
    with_line("uuid with a newline", lambda ls: ls[0]["workload"].__setitem__("uuid", "a\nb"))
    return out


def const_definition(good_def: dict) -> dict:
    d = copy.deepcopy(good_def)
    d["axes"]["h"] = {"type": "const", "value": 8}
    return d


def setup_cases() -> list[tuple[str, str, tuple[str, ...]]]:
    """(name, .autogk.toml text, words the problem must name) for setups `iterate` would trip on."""
    cases = [
        ("unknown default target", '[project]\ntarget = "nope"\n', ("[project] target",)),
        ("targets is a file", '[project]\ntargets = ".autogk.toml"\n', ("[project] targets",)),
        ("targets missing", '[project]\ntargets = "nowhere"\n', ("[project] targets",)),
        ("trials = true", "[bench]\ntrials = true\n", ("[bench] trials",)),
        ("cpu_max_numel = 1e300", "[bench]\ncpu_max_numel = 1e300\n", ("[bench] cpu_max_numel",)),
        ("command agent without command", '[agent]\nkind = "command"\n', ("[agent] command",)),
        ("command agent, missing binary", '[agent]\nkind = "command"\ncommand = "no-such-cli-anywhere -p"\n',
         ("[agent] command",)),
        ("unbalanced quote", '[agent]\nkind = "command"\ncommand = "claude -p \\"oops"\n', ("[agent] command",)),
        ("unbalanced single quote", "[agent]\ncommand = \"claude -p 'oops\"\n", ("[agent] command",)),
        ("trailing backslash", '[agent]\ncommand = "claude \\\\"\n', ("[agent] command",)),
    ]
    for lo, hi in ((50, 10), (6, 5), (10_000, 1)):
        cases.append((f"min_rounds {lo} > max_rounds {hi}", f"[bench]\nmin_rounds = {lo}\nmax_rounds = {hi}\n",
                      ("min_rounds",)))
    for globs in ("[]", '[""]', '["../kernel.py"]', '["/etc/passwd"]', '["../../*"]', '["a/../../b"]', '["~/x"]'):
        cases.append((f"editable = {globs}", f"[agent]\neditable = {globs}\n", ("[agent] editable",)))
    return cases


def test_fuzz_special_files_references_workloads_setups(project, monkeypatch, capsys, tmp_path):
    from autogk_git import scaffold
    from autogk_git.commands import doctor
    from autogk_git.project import Project, Target

    monkeypatch.setenv("AUTOGK_BENCH_BACKEND", "interpret")
    monkeypatch.setenv("AUTOGK_TRACKING_ENABLED", "false")
    tally = Tally()
    started = time.monotonic()
    marks: list[float] = []
    good_def = json.loads((DATA / "scale" / "definition.json").read_text())
    good_wls = [json.loads(x) for x in (DATA / "scale" / "workloads.jsonl").read_text().splitlines() if x.strip()]

    # 1. Special files in every role a user names a file: refused by type or size, before any read.
    for kind, path in special_files(tmp_path / "special"):
        judge_case(tally, f"definition: {kind}", lambda p=path: scaffold.load_definition(p), (str(path),))
        judge_case(tally, f"workloads: {kind}", lambda p=path: scaffold.read_workloads(p, good_def), (str(path),))
        judge_case(tally, f"kernel: {kind}", lambda p=path: scaffold.read_kernel(p, good_def), (str(path),))
        slug = kind.replace("/", "_").replace(" ", "_")
        judge_case(tally, f".autogk.toml: {kind}", lambda p=path, s=slug: _config_from(p, tmp_path / "cfg" / s),
                   (".autogk.toml",))
        tdir = tmp_path / "targets" / slug
        tdir.mkdir(parents=True)
        (tdir / "definition.json").write_text(json.dumps(good_def))
        (tdir / "workloads.jsonl").symlink_to(path)
        judge_case(tally, f"target's workloads.jsonl: {kind}", lambda d=tdir: Target("scale", d).workloads,
                   ("workloads.jsonl",))

    marks.append(time.monotonic())
    # 2. References that return the wrong thing or raise: in-process, on each of three workload sizes.
    for size in (1, 7, 100):
        wl = {"uuid": f"w{size}", "axes": {"n": size},
              "inputs": {"x": {"type": "random"}, "bias": {"type": "random"}, "scale": {"type": "scalar", "value": 1.5}}}
        for name, ref in REFERENCES.items():
            if name == "recursion" and size != 1:
                continue  # one is enough: each costs a RecursionError's depth
            d = {**copy.deepcopy(good_def), "reference": ref}
            judge_case(tally, f"reference {name} (n={size})",
                       lambda d=d, wl=wl: check_reference_in_process(d, wl), ("defs/scale.json",))

    marks.append(time.monotonic())
    # 3. Workloads wrong for their definition: at init (scaffold) and in a project (Target).
    wl_file = tmp_path / "wl.jsonl"
    for name, text in workload_semantic_cases(good_wls):
        wl_file.write_text(text)
        judge_case(tally, f"workloads {name} (init)", lambda: scaffold.read_workloads(wl_file, good_def), ("wl.jsonl:",))
        (project / TARGET / "workloads.jsonl").write_text(text)
        judge_case(tally, f"workloads {name} (project)", lambda: Project(project).target("scale").workloads,
                   ("workloads.jsonl:",))
    git(project, "checkout", "--", TARGET)
    cdef = const_definition(good_def)
    for v in (4, 9, 0, 4096):
        lines = copy.deepcopy(good_wls)
        lines[0]["workload"]["axes"]["h"] = v
        wl_file.write_text("".join(json.dumps(x) + "\n" for x in lines))
        judge_case(tally, f"const axis h overridden to {v}", lambda: scaffold.read_workloads(wl_file, cdef), ("wl.jsonl:",))

    marks.append(time.monotonic())
    # 4. Setups doctor must list as problems (exit 1), naming the key.
    good_cfg = (project / ".autogk.toml").read_text()
    monkeypatch.chdir(project)
    for name, text, names in setup_cases():
        (project / ".autogk.toml").write_text(text)

        def doctor_says(names=names):
            info = doctor.checks()
            hits = [p for p in info["problems"] if any(n in p for n in names)]
            if hits:
                from autogk_git.errors import AutogkError
                raise AutogkError(hits[0], "doctor's problem line")
        judge_case(tally, f"doctor: {name}", doctor_says, names)
    (project / ".autogk.toml").write_text(good_cfg)

    marks.append(time.monotonic())
    # 5. The real command line where the process is the point: a reference that ends its process, never
    #    returns or imports what is not there; a FIFO definition; init leaves nothing behind.
    for name, ref in (("os._exit", "import os\ndef run(x, bias, scale):\n    os._exit(7)\n"),
                      ("endless loop", "def run(x, bias, scale):\n    while True:\n        pass\n"),
                      ("missing module", "import no_such_module_anywhere\ndef run(x, bias, scale):\n    return x\n")):
        d = tmp_path / f"def-{name.replace(' ', '_')}.json"
        d.write_text(json.dumps({**good_def, "reference": ref}))
        dest = tmp_path / f"proj-{name.replace(' ', '_')}"
        try:
            proc = autogk(tmp_path, "init", str(dest), "--definition", str(d), "--workloads",
                          str(DATA / "scale" / "workloads.jsonl"), check=False, timeout=240,
                          env={"AUTOGK_BENCH_REFERENCE_TIMEOUT_S": "3"})
        except subprocess.TimeoutExpired:
            tally.add("hang", f"init: reference {name}")
            continue
        out = proc.stdout + proc.stderr
        if proc.returncode == 0:
            tally.add("wrongly accepted", f"init: reference {name}", out)
        elif "Traceback" in out or "crashed" in out:
            tally.add("traceback", f"init: reference {name}", out)
        elif dest.exists() or f"error: {d}" not in out or "kernel" in out.split("error:", 1)[1].split("\n")[0]:
            tally.add("unclear", f"init: reference {name}", out + f" (left behind: {dest.exists()})")
        else:
            tally.add("clean", f"init: reference {name}")

    elapsed = time.monotonic() - started
    steps = [b - a for a, b in zip([started, *marks], [*marks, time.monotonic()])]
    print(f"\nfuzz: {tally.total} cases in {elapsed:.0f} s (sections: {', '.join(f'{x:.0f}' for x in steps)} s): "
          + ", ".join(f"{k} {v}" for k, v in tally.counts.items()))
    assert tally.total >= 200
    assert tally.counts["clean"] == tally.total, f"{len(tally.failures)} of {tally.total}:\n" + "\n".join(tally.failures[:40])


def check_reference_in_process(definition: dict, wl: dict) -> None:
    """What init runs on a definition's reference, here in-process (these references all return)."""
    try:
        from autogk_git.bench import refcheck
    except ImportError:  # a tree without the check accepts every reference: run on it, this says so
        return
    refcheck.check(definition, [wl], "defs/scale.json", 60, isolate=False)


def _config_from(path: Path, root: Path):
    """Load a project's config when its `.autogk.toml` is `path` (a symlink to it)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / config.CONFIG_NAME).symlink_to(path)
    return config.load(root)
