"""flashinfer-bench's own models on a definition (fib.py)."""
from __future__ import annotations

import json
import sys

import pytest

from autogk_git import fib
from autogk_git.errors import TargetError
from conftest import REPO

EXAMPLE = REPO / "autogk_git" / "examples" / "rmsnorm_h4096"

pytestmark = pytest.mark.skipif(not fib.available(), reason="flashinfer-bench is not installed")


def test_what_flashinfer_bench_accepted_once_is_not_checked_again_and_a_rejection_always_is(own_cache, monkeypatch):
    # Importing flashinfer-bench imports torch (~2 s of a bundled example's `init`): a definition and
    # workloads it accepted are remembered by content; changed ones, and rejected ones, are checked again.
    definition = json.loads((EXAMPLE / "definition.json").read_text())
    workloads = [json.loads(line)["workload"] for line in (EXAMPLE / "workloads.jsonl").read_text().splitlines()]
    assert fib.validate(definition, workloads).startswith("flashinfer-bench accepts")
    monkeypatch.setitem(sys.modules, "flashinfer_bench.data", None)  # any import of its models now fails
    assert fib.validate(definition, workloads).startswith("flashinfer-bench accepts")
    with pytest.raises(ImportError):  # one workload fewer: other content, checked again
        fib.validate(definition, workloads[1:])
    monkeypatch.delitem(sys.modules, "flashinfer_bench.data")
    broken = dict(definition, axes={"batch_size": {"type": "nonsense"}})
    for _ in range(2):
        with pytest.raises(TargetError, match="rejects the definition"):
            fib.validate(broken, workloads)
