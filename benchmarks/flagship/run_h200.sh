#!/usr/bin/env bash
# The flagship run on one GPU: autogk driven by the scripted coding agent (attempt.py) on both DSA
# targets, each attempt an experiment judged by autogk's own verdicts, then the best checked by the
# independent timer (loop_gpu.py). Usage, from the repository root on a CUDA machine:
#   bash benchmarks/flagship/run_h200.sh OUT_DIR [SECONDS_PER_TARGET]
set -u
out=${1:?usage: run_h200.sh OUT_DIR [SECONDS_PER_TARGET]}
per=${2:-150}
mkdir -p "$out"
export PYTHONPATH=$PWD AUTOGK_TRACKING_ENABLED=0
# The attempts are read from this checkout, which may sit under $HOME, which the agent's bubblewrap
# sandbox hides: the scripted agent runs with the undo-after-the-run confinement only. Profiles are
# off to spend the device time on experiments (each keep would add ~11 s per profiled workload).
export AUTOGK_AGENT_SANDBOX=none AUTOGK_BENCH_PROFILE=off
agent="python $PWD/benchmarks/flagship/attempt.py"
for t in dsa_topk_indexer_fp8_h64_d128_topk2048_ps64 dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64; do
  n=$(ls benchmarks/flagship/$t/[0-9][0-9]_*.py | wc -l)
  timeout $((per + 110)) python benchmarks/loop_gpu.py --target "$t" -n "$n" --max-time "$per" --grace 20 \
    --timing-budget-s 20 --agent-command "$agent" --out "$out/$t" \
    > "$out/$t.log" 2>&1
  echo "$t rc=$?" >> "$out/summary.txt"
  grep -E "^\| [0-9]+ \||median|agreement|geomean" "$out/$t/loop_$t.md" >> "$out/summary.txt" 2>/dev/null
done
cat "$out/summary.txt"
