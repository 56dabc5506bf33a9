#!/usr/bin/env bash
# Nsight Compute on one sparse-attention call of a kernel file, per instruction: where its warps stall.
#
#     OUT=DIR bash benchmarks/sa_ncu.sh KERNEL.py TOKENS VALID [KERNEL_NAME]
#
# Inputs as benchmarks/sa_fixed_cost.py makes them (TOKENS rows, the first VALID ids valid, the rest -1); the
# call is made three times and the third profiled (--set full, SourceCounters included, a warp sampled every
# 2^(5+NCU_INTERVAL) cycles: 32 by default, so a one-program call still gets thousands of samples). Writes under OUT:
# ncu.log, details.csv (every section), sass.csv (each SASS instruction with its samples and stall reasons).
set -u
cd "$(dirname "$0")/.."
K=$1; T=$2; V=$3; NAME=${4:-_attend_block}
OUT=${OUT:-$PWD/sa-ncu-out}; mkdir -p "$OUT"
cat > "$OUT/one_call.py" <<PY
import sys
sys.path.insert(0, "benchmarks")
from pathlib import Path
import torch
from dsa_bench import load_module
from sa_fixed_cost import inputs
mod = load_module("sa_kernel", Path("$K"))
args = inputs($T, $V)
for _ in range(3):
    mod.run(*args)
torch.cuda.synchronize()
PY
ncu --set full --warp-sampling-interval ${NCU_INTERVAL:-0} --import-source no --kernel-name "$NAME" --launch-skip 2 --launch-count 1 -f -o "$OUT/rep" \
  python3 "$OUT/one_call.py" > "$OUT/ncu.log" 2>&1
echo "ncu rc=$?" >> "$OUT/ncu.log"
ncu --import "$OUT/rep.ncu-rep" --csv --page details > "$OUT/details.csv" 2>> "$OUT/ncu.log"
ncu --import "$OUT/rep.ncu-rep" --csv --page source --print-source sass > "$OUT/sass.csv" 2>> "$OUT/ncu.log"
ls -la "$OUT" >> "$OUT/ncu.log"
