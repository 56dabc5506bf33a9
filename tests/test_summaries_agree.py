"""Every summary a person reads after a real CPU run agrees with the result notes: the loop's last line and
progress, `log`, `show`, `best`, the report page, `pack`'s message and the offline research plan.

One run of the scale target on Triton's interpreter, with two of its five workloads over
`[bench] cpu_max_numel` (so nothing is judged on every workload): first holding correct candidates (held
untimed, the default of a new project), then merging them (a keep and a revert)."""
from __future__ import annotations

import json
import re
from collections import Counter

from conftest import autogk_in, git, notes_json

LIMIT = {"AUTOGK_BENCH_CPU_MAX_NUMEL": "1000"}  # n=1000 (2000 elements) and n=4096 (8192) are over it
WORDS = {"keep": "kept", "revert": "reverted", "untimed": "held untimed", "invalid": "invalid"}


def concluded(root) -> dict[int, str]:
    """{experiment number: its commit} of every concluded experiment (kept, archived or held)."""
    out = {}
    for line in git(root, "for-each-ref", "--format=%(refname) %(objectname)", "refs/autogk/").splitlines():
        name, sha = line.split()
        out[int(name.rsplit("/", 1)[-1])] = sha
    return out


def decisions(root) -> dict[int, str]:
    """{experiment number: decision} read from the result notes of every concluded experiment."""
    return {n: notes_json(root, sha)["verdict"]["decision"] for n, sha in concluded(root).items()}


def tally_words(decs) -> str:
    c = Counter(decs)
    parts = [f"{c.get(d, 0)} {WORDS[d]}" for d in ("keep", "revert")]
    parts += [f"{c[d]} {WORDS[d]}" for d in ("untimed", "invalid") if c.get(d)]
    return f"{sum(c.values())} experiment(s): " + ", ".join(parts)


def check_loop_output(out: str, root, numbers: list[int]) -> None:
    """The done line counts what the notes say; progress lines name workloads by axes and time each one;
    verdict lines fit a terminal."""
    decs = decisions(root)
    c = Counter(decs[n] for n in numbers)
    done = next(ln for ln in out.splitlines() if ln.startswith("done: "))
    assert f"{len(numbers)} experiment(s) concluded" in done, done
    assert f"{c.get('keep', 0)} kept, {c.get('revert', 0)} reverted" in done, done
    if c.get("untimed"):
        assert f"{c['untimed']} held untimed" in done, done
    verdicts = [ln for ln in out.splitlines() if re.match(r"#\d{4}: (KEEP|REVERT|HELD|VOID) - ", ln)]
    assert len(verdicts) == len(numbers), out
    assert all(len(ln) <= 120 for ln in verdicts), [len(ln) for ln in verdicts]
    for n in numbers:  # each verdict line says the decision its note holds
        word = {"keep": "KEEP", "revert": "REVERT", "untimed": "HELD", "invalid": "VOID"}[decs[n]]
        assert any(ln.startswith(f"#{n:04d}: {word} - ") for ln in verdicts), (n, verdicts)
    prog = re.compile(r"^  (quick|full) (\d+)/(\d+): candidate on (\S+): (\w+) \((\d+\.\d) s\)$")
    lines = [m for m in map(prog.match, out.splitlines()) if m]
    assert lines, out
    assert {m[4] for m in lines} <= {"n=50", "n=100", "n=333"}, {m[4] for m in lines}  # axes, not uuid heads
    # Each line's time is that workload's own: one stage's lines sum to no more than the stage took.
    for n in numbers:
        stages = notes_json(root, concluded(root)[n])["stages"]
        exp_lines = out.split(f"#{n:04d}: committed", 1)[1].split(f"#{n:04d}: ", 1)[0]
        for name, st in stages.items():
            times = [float(m[6]) for m in map(prog.match, exp_lines.splitlines()) if m and m[1] == name]
            assert times and sum(times) <= st["elapsed_s"] + 0.2, (n, name, times, st["elapsed_s"])


def test_every_summary_agrees_with_the_notes(project):
    root = project
    first = autogk_in(root, "iterate", "-n", "1", env={**LIMIT, "AUTOGK_BENCH_UNTIMED": "hold"}).stdout  # held
    made = sorted(decisions(root))
    check_loop_output(first, root, made)
    second = autogk_in(root, "iterate", "-n", "2", env=LIMIT).stdout  # the project merges correct candidates
    later = sorted(set(decisions(root)) - set(made))
    check_loop_output(second, root, later)
    decs = decisions(root)
    c = Counter(decs.values())
    assert c["keep"] and c["revert"] and c["untimed"], decs  # the run shows every outcome it can on a CPU
    words = tally_words(decs.values())

    # log: the marks it prints are the notes' decisions, and a filter takes the word it printed.
    log = autogk_in(root, "log").stdout.splitlines()
    marks = Counter(re.match(r"scale #\d{4} (\w+)", ln)[1] for ln in log)
    assert marks == Counter({"KEEP": c["keep"], "REVERT": c["revert"], "HELD": c["untimed"]}), log
    held = autogk_in(root, "log", "--verdict", "held").stdout
    assert sorted(int(m) for m in re.findall(r"#(\d{4}) HELD", held)) == sorted(n for n, d in decs.items()
                                                                                if d == "untimed")

    # show: workloads by their axes; the skipped ones with the one wording and its numbers.
    n_held = max(n for n, d in decs.items() if d == "untimed")
    show = autogk_in(root, "show", str(n_held)).stdout
    assert re.search(r"^quick\s+n=50\s+PASSED", show, re.M), show
    assert re.search(r"^-\s+n=4096\s+not checked\s+over \[bench\] cpu_max_numel \(8192 > 1000\)$", show, re.M), show

    # best: no kernel is judged on every workload; it says why once, with the command that resolves it.
    best = autogk_in(root, "best").stdout
    assert "none judged on every workload" in best and "or workloads the backend" not in best, best
    assert "AUTOGK_BENCH_CPU_MAX_NUMEL=8192 autogk iterate" in best, best
    assert f"{c['keep']} experiment(s) kept on" in best, best

    # report: the counts are the notes', nothing says "nothing kept" after keeps, the skip is named.
    autogk_in(root, "report", env={"AUTOGK_TRACKING_ENABLED": "false"})
    page = (root / "mlruns" / "reports" / "scale.html").read_text()
    assert f"<p>{words}. " in page, (words, page[:800])
    assert "Nothing kept" not in page and "nothing kept" not in page
    assert "2 never ran (2 over [bench] cpu_max_numel)" in page and "stride" not in page
    assert page.count('class="held"') == c["untimed"]

    # pack --force: the same reason as best, and never "nothing kept" after keeps.
    packed = autogk_in(root, "pack", "--force").stdout
    assert "nothing kept" not in packed and "none judged on every workload" in packed, packed
    info = json.loads(autogk_in(root, "pack", "--force", "--json").stdout)
    assert info["why"] in packed and info["commit"] == git(root, "rev-parse", "main").strip()

    # The offline research plan: the same counts; no regime named as measured when nothing was timed.
    plan = autogk_in(root, "research", "--offline").stdout
    diagnosis = plan.split("## Diagnosis", 1)[1].split("##", 1)[0]
    assert f"{words};" in diagnosis, diagnosis
    assert re.search(r"\d+ launch-bound by size", diagnosis) and "nothing was timed" in diagnosis, diagnosis
    assert "Most workloads are launch-bound" not in plan
