#!/usr/bin/env bash
# One call on a machine with two CUDA GPUs (about 9.5 minutes): the GPU tests and the tuner on
# rmsnorm_h4096 on GPU 0, the tuner on a DSA target on GPU 1, side by side; every step under its
# own time limit. Results go to OUT (default ./gpu-session-out), one tar.gz per part.
#
#     OUT=/some/dir bash benchmarks/gpu_session.sh [DSA_TARGET]
#
# DSA_TARGET defaults to the top-k indexer. MLflow is not needed (AUTOGK_TRACKING_ENABLED=0).
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-session-out}
DSA=${1:-dsa_topk_indexer_fp8_h64_d128_topk2048_ps64}
mkdir -p "$OUT" /tmp/gpu-session
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 AUTOGK_TRACKING_ENABLED=0
nvidia-smi -L > "$OUT/gpus.txt" 2>&1

# GPU 1: the DSA target's loop (the independent timing and the report follow it, inside the limit).
(CUDA_VISIBLE_DEVICES=1 AUTOGK_GPU_LOCK_DIR=/tmp/gpu-session/lk1 timeout 560 python3 benchmarks/loop_gpu.py \
    --target "$DSA" -n 20 --max-time 400 --grace 60 --wall-limit 550 --timing-budget-s 60 \
    --out /tmp/gpu-session/dsa > "$OUT/dsa.log" 2>&1; echo "rc=$?" >> "$OUT/dsa.log") &

# GPU 0: the GPU tests, then the tuner on the bundled rmsnorm target with what time is left.
CUDA_VISIBLE_DEVICES=0 timeout 240 python3 -m pytest -q -o addopts= -m gpu tests/test_judge_gpu.py \
    tests/test_verdict_gpu.py tests/test_gpu.py > "$OUT/gpu_tests.log" 2>&1
echo "rc=$?" >> "$OUT/gpu_tests.log"
LEFT=$(( 540 - SECONDS ))
if [ "$LEFT" -gt 120 ]; then
  CUDA_VISIBLE_DEVICES=0 AUTOGK_GPU_LOCK_DIR=/tmp/gpu-session/lk0 timeout "$LEFT" python3 benchmarks/loop_gpu.py \
      --target rmsnorm_h4096 -n 10 --max-time $(( LEFT - 90 )) --grace 30 --wall-limit $(( LEFT - 5 )) \
      --timing-budget-s 30 --out /tmp/gpu-session/rmsnorm > "$OUT/rmsnorm.log" 2>&1
  echo "rc=$?" >> "$OUT/rmsnorm.log"
fi
wait
for part in dsa rmsnorm; do
  [ -d "/tmp/gpu-session/$part" ] && tar czf "$OUT/$part.tgz" -C /tmp/gpu-session "$part"
done
tail -3 "$OUT/gpu_tests.log"
