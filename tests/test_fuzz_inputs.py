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
