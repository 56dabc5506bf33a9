#!/usr/bin/env bash
# Creates .venv with everything autogk and its tests need, CPU-only: the small CPU torch wheel,
# triton, MLflow, flashinfer-bench's data model (without its CUDA-only dependencies). Idempotent:
# a stamp of pyproject.toml and this script makes a second call return at once.
#
# Installs with uv (itself a small package from the registry, put into .venv first): it downloads
# and unpacks in parallel, which is most of the difference between about 2 and about 7 minutes on a
# fresh machine. Without uv (it cannot be installed, or AUTOGK_SETUP_PIP=1) pip does the same work.
# Either way the packages come from the same places pip is configured to use here (pip's own
# settings are handed to uv), so torch resolves to the same small CPU wheel.
set -euo pipefail
cd "$(dirname "$0")/.."
stamp=.venv/.autogk-setup
want="$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -c1-16)"
if [ -x .venv/bin/python ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
start=$SECONDS
step() { echo "setup [$1/6, ${2}s] $3"; }
step 1 $((SECONDS - start)) "creating .venv (about 2.5 GB once installed: torch and triton are most of it)"
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
py=.venv/bin/python
pip() { "$py" -m pip -q --disable-pip-version-check "$@" 2>&1 | grep -v "^WARNING: Location" || true; }

# torch is pinned and installed first: a bare `torch` requirement would pull a multi-GB CUDA build.
base=("torch==2.13.0" "triton==3.7.1")
pkg=(-e ".[kernels,tracking,fib,agents,test,report,modal]")
# flashinfer-bench's full install pulls ~1.5 GB of CUDA-only packages; its data model needs none of them.
fib=("flashinfer-bench==0.1.2")

use_uv=1
[ "${AUTOGK_SETUP_PIP:-0}" = 1 ] && use_uv=0
if [ "$use_uv" = 1 ]; then
  step 2 $((SECONDS - start)) "installing the installer (uv)"
  if [ ! -x .venv/bin/uv ]; then
    pip install "uv>=0.5" || true
  fi
  [ -x .venv/bin/uv ] || { echo "setup: uv could not be installed; using pip (slower)"; use_uv=0; }
fi

if [ "$use_uv" = 1 ]; then
  # pip's settings (index URLs, local wheel folders, constraints) as uv arguments, so both installers
  # see the same packages. unsafe-best-match is pip's rule: the best version across every index.
  mapfile -t src < <("$py" - <<'EOF'
import subprocess, sys
out = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True).stdout
flags = {"index-url": "--index-url", "extra-index-url": "--extra-index-url", "find-links": "--find-links",
         "constraint": "--constraint"}
seen = set()
for line in out.splitlines():
    key, _, value = line.partition("=")
    key = key.rsplit(".", 1)[-1]
    if key in flags:
        for v in value.strip().strip("'\"").split():
            if (key, v) not in seen:
                seen.add((key, v))
                print(flags[key]); print(v)
EOF
)
  # uv's download lines are the progress; the list of every installed package (120 lines) is left out.
  uvp() {
    .venv/bin/uv pip install --python "$py" --index-strategy unsafe-best-match "${src[@]}" "$@" 2>&1 \
      | { grep -v '^ [-+] ' || true; }
    return "${PIPESTATUS[0]}"
  }
  step 3 $((SECONDS - start)) "torch (CPU) and triton"
  uvp "${base[@]}"
  step 4 $((SECONDS - start)) "autogk with MLflow, matplotlib, anthropic, modal, pytest"
  uvp "${base[@]}" "${pkg[@]}"
  step 5 $((SECONDS - start)) "flashinfer-bench's data model"
  uvp --no-deps "${fib[@]}"
else
  step 3 $((SECONDS - start)) "torch (CPU) and triton, with pip"
  pip install "${base[@]}"
  step 4 $((SECONDS - start)) "autogk with MLflow, matplotlib, anthropic, modal, pytest"
  pip install "${pkg[@]}"
  step 5 $((SECONDS - start)) "flashinfer-bench's data model"
  pip install --no-deps "${fib[@]}"
fi
# Bytecode, written once here: uv installs without it, and where PYTHONDONTWRITEBYTECODE is set (this
# project's machines set it) Python never writes it either, so every process compiled torch's and
# MLflow's sources again on import: 3.9 CPU-s for `import torch`, 5.6 for `import mlflow`, against 1.7
# and 1.9 with the bytecode in place (2-core machine, 2026-12-02). Every judge job, hook and iterate
# pays those imports. Files that are not Python 3 source (templates in some packages) are skipped.
step 6 $((SECONDS - start)) "compiling bytecode (once; every later import reads it), then a check that everything imports"
"$py" -m compileall -q -j 0 "$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" autogk_git \
  >/dev/null 2>&1 || true
"$py" -c "import torch, triton, mlflow, flashinfer_bench, anthropic, matplotlib, modal, autogk_git"
"$py" -c "import torch, sys; sys.exit(f'setup: got a CUDA torch ({torch.__version__}); expected the CPU wheel' if torch.version.cuda else 0)"
echo "$want" > "$stamp"
echo "setup: done in $((SECONDS - start))s; $(du -sh .venv | cut -f1) in .venv. Run autogk as .venv/bin/autogk, or first: source .venv/bin/activate"
