"""benchmarks/aa_full.py --slower: the copy of the bundled rmsnorm kernel made slower for the power run
computes the same outputs, and its spin compiles for an H200 (sm_90) where the backend can compile."""
from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "benchmarks"))
import aa_full  # noqa: E402

KERNEL = (REPO / "autogk_git" / "examples" / "rmsnorm_h4096" / "kernel.py").read_text()


def load(tmp_path: Path, name: str, text: str):
    p = tmp_path / f"{name}.py"
    p.write_text(text)
    spec = importlib.util.spec_from_file_location(name, p)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_slowed_copy_writes_what_the_kernel_writes(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    text = aa_full.slowed_source(KERNEL, 0.0309)
    assert "_aa_spin(t0, 309, 10000)" in text and "%clock64" in text
    slow, base = load(tmp_path, "slowed_rms", text), load(tmp_path, "base_rms", KERNEL)
    x = torch.randn(5, 4096).bfloat16()
    w = torch.randn(4096).bfloat16()
    a, b = torch.empty_like(x), torch.empty_like(x)
    slow.run(x, w, a)
    base.run(x, w, b)
    assert torch.equal(a, b)


def test_the_slowed_copy_refuses_a_kernel_it_was_not_made_for():
    with pytest.raises(SystemExit, match="bundled rmsnorm kernel"):
        aa_full.slowed_source("def run(x, out):\n    out.copy_(x)\n", 0.03)


COMPILE = """
import sys
sys.path.insert(0, sys.argv[1])
import importlib.util, aa_full, triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
open(sys.argv[2], "w").write(aa_full.slowed_source(open(sys.argv[3]).read(), 0.0309))
spec = importlib.util.spec_from_file_location("slowed_rms_gpu", sys.argv[2])
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
sig = {"x_ptr": "*bf16", "w_ptr": "*bf16", "y_ptr": "*bf16", "stride_x": "i32", "stride_y": "i32",
       "n_cols": "i32", "eps": "fp32", "BLOCK_SIZE": "constexpr", "SPIN": "constexpr"}
c = triton.compile(ASTSource(fn=mod._rmsnorm_kernel, signature=sig, constexprs={"BLOCK_SIZE": 1024, "SPIN": True}),
                   target=GPUTarget("cuda", 90, 32))
print("CLOCK64", c.asm["ptx"].count("clock64"))
"""


def test_the_spin_compiles_for_sm90(tmp_path):
    # In a process of its own: the interpreter (the test above) leaves triton.language patched.
    import subprocess
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    out = subprocess.run([sys.executable, "-c", COMPILE, str(REPO / "benchmarks"), str(tmp_path / "slowed.py"),
                          str(REPO / "autogk_git" / "examples" / "rmsnorm_h4096" / "kernel.py")],
                         capture_output=True, text=True, env=env, timeout=600)
    if "CLOCK64" not in out.stdout:
        pytest.skip(f"cannot compile for cuda here: {out.stderr[-600:]}")
    assert int(out.stdout.split("CLOCK64")[1].split()[0]) >= 3  # start, end, and inside the spin loop
