"""Small pure pieces: ref names, tunables, result notes."""
from __future__ import annotations

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
