"""Small pure pieces: ref names, tunables, result notes."""
from __future__ import annotations

from pathlib import Path

import pytest

from autogk_git import tunables
from autogk_git.record import notes
from autogk_git.record import refs

SRC = "X = 1\nBLOCK = 64  # autogk: tune [32, 64, 128]\nN2 = 2  # autogk: tune [2, 4]\nplain = 5\n"


def test_experiment_ref_round_trip():
    r = refs.ExperimentRef("rmsnorm_h4096", 12, "tune-block-64-128")
    assert r.branch == "autogk/rmsnorm_h4096/0012-tune-block-64-128"
    assert refs.ExperimentRef.parse(r.branch) == ("branch", r)
    assert refs.ExperimentRef.parse(r.archive_ref) == ("archive", refs.ExperimentRef("rmsnorm_h4096", 12))
    assert refs.ExperimentRef.parse("refs/heads/autogk/trunk") is None
    assert refs.ExperimentRef.parse("refs/heads/main") is None


def test_slugify():
    assert refs.slugify("tune: BLOCK 64 -> 128") == "tune-block-64-128"
    assert refs.slugify("!!!") == "change"


def test_tunables_parse_and_set_changes_only_that_value():
    t = tunables.parse(SRC)
    assert {n: (v.value, v.choices) for n, v in t.items()} == {"BLOCK": (64, (32, 64, 128)), "N2": (2, (2, 4))}
    new = tunables.set_value(SRC, "N2", 4)
    assert new == SRC.replace("N2 = 2 ", "N2 = 4 ")
    assert tunables.values(new) == {"BLOCK": 64, "N2": 4}
    with pytest.raises(ValueError):
        tunables.set_value(SRC, "plain", 3)


def test_result_note_has_a_human_line_and_survives_concatenation():
    res = {"target": "t", "experiment": 3, "commit": "abc", "verdict": {"decision": "keep", "reason": "ok"}}
    text = notes.format_result(res)
    assert text.splitlines()[0].startswith("autogk t #0003: KEEP")
    assert notes.parse_result(text) == res
    stale = notes.format_result(dict(res, commit="old"))
    both = text + "\n" + stale  # what git's notes.rewriteMode=concatenate leaves after an amend
    assert notes.parse_result(both, "abc") == res
    assert notes.parse_result(stale + "\n", "abc") is None
    assert notes.parse_result("no json here") is None


def test_the_judge_caches_bytecode_only_where_the_installed_torch_has_none(tmp_path, monkeypatch):
    from autogk_git.bench.judge import hygiene
    pkg = tmp_path / "site" / "fakepkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    assert not hygiene._has_bytecode("fakepkg")
    monkeypatch.setattr(hygiene, "_has_bytecode", lambda name: False)
    env = hygiene.bytecode_cache({"HOME": str(tmp_path), "PYTHONDONTWRITEBYTECODE": "1"}, "judge")
    ours = tmp_path / ".cache" / "autogk" / "pycache"
    assert env["PYTHONPYCACHEPREFIX"] == str(ours / "judge") and "PYTHONDONTWRITEBYTECODE" not in env
    # a kernel's processes get a folder of their own: they never write what the judge imports
    assert hygiene.bytecode_cache(dict(env), "kernels")["PYTHONPYCACHEPREFIX"] == str(ours / "kernels")
    # the user's own prefix is left alone, and so is an install that has its bytecode
    mine = {"HOME": str(tmp_path), "PYTHONPYCACHEPREFIX": "/elsewhere"}
    assert hygiene.bytecode_cache(dict(mine), "judge") == mine
    monkeypatch.setattr(hygiene, "_has_bytecode", lambda name: True)
    assert "PYTHONPYCACHEPREFIX" not in hygiene.bytecode_cache({"HOME": str(tmp_path)}, "judge")
    # what was cached for a job's temp folders goes with the job; the rest stays
    import tempfile
    tmp = Path(tempfile.gettempdir()).resolve().relative_to("/")
    job = ours / "kernels" / tmp / "autogk-worker-x" / "k1"
    job.mkdir(parents=True)
    keep = ours / "judge" / "usr" / "lib"
    keep.mkdir(parents=True)
    hygiene.drop_job_bytecode(env)
    assert not (ours / "kernels" / tmp / "autogk-worker-x").exists() and keep.exists()
    # a user's own prefix (even one named like ours) is never cleaned
    theirs = tmp_path / "mine" / "pycache" / "judge"
    (theirs.parent / "kernels" / tmp / "autogk-worker-y").mkdir(parents=True)
    hygiene.drop_job_bytecode({"HOME": str(tmp_path), "PYTHONPYCACHEPREFIX": str(theirs)})
    assert (theirs.parent / "kernels" / tmp / "autogk-worker-y").exists()


def test_a_job_ended_before_the_judge_wrote_any_bytecode_cleans_up_without_a_crash(tmp_path):
    # Seen in CI: Ctrl-C during the first job of a fresh HOME; the runner's clean-up listed a cache
    # folder never made, and the FileNotFoundError replaced the interrupt ("autogk crashed").
    from autogk_git.bench.judge import hygiene
    ours = tmp_path / ".cache" / "autogk" / "pycache"
    hygiene.drop_job_bytecode({"HOME": str(tmp_path), "PYTHONPYCACHEPREFIX": str(ours / "judge")})
    assert not ours.exists()
