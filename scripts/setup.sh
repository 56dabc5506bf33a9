#!/usr/bin/env bash
# Creates .venv with everything autogk and its tests need, CPU-only: the small CPU torch wheel,
# triton, MLflow, flashinfer-bench's data model (without its CUDA-only dependencies). Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
stamp=.venv/.autogk-setup
want="$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -c1-16)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
pip() { .venv/bin/python -m pip -q --disable-pip-version-check "$@" 2>&1 | grep -v "^WARNING: Location" || true; }
# torch first and pinned: a bare `torch` requirement would pull a multi-GB CUDA build.
pip install "torch==2.13.0" "triton==3.7.1"
pip install -e ".[kernels,tracking,fib,agents,test,report,modal]"
# flashinfer-bench's full install pulls ~1.5 GB of CUDA-only packages; its data model needs none of them.
pip install --no-deps "flashinfer-bench==0.1.2"
.venv/bin/python -c "import torch, triton, mlflow, flashinfer_bench, anthropic, matplotlib, modal, autogk_git" 
echo "$want" > "$stamp"
