#!/usr/bin/env bash
# One device call on a one-GPU machine, made of named steps run in order under one time budget:
#
#     OUT=DIR bash benchmarks/h200_call.sh NAME BUDGET_S STEP[=SECONDS] ...
#
# Steps:
#   tests[=S]   pytest -m gpu -v over the three GPU test files (the never-ending window left to `never`),
#               one pytest a file, the shortest first, so that a cut loses one
#               file's summary, not all three (limit S in all, default 480; a file gets what the files
#               before it left, less 60 s a file still to come; pytest-timeout, where installed, ends
#               one test at 180 s, or 20 s before its file's limit, with its traceback; tests that trace
#               their job's processes write under trace/); TESTS_K=EXPR in the environment keeps only the tests
#               pytest's -k EXPR selects (those a cut stopped last time, say)
#   never[=S]   the never-ending-window GPU test alone, both ways a judge starts (exec, fork), each traced
#               every 5 s under trace/ (default 360: ~40 s a way when it ends, 170 s a way when it does not)
#   tuner[=S]   benchmarks/loop_gpu.py on rmsnorm_h4096, -n 10, its independent timer included (default 360:
#               loop_gpu keeps ~165 s of --wall-limit for init, grace, the timing and the report, and ten
#               experiments take ~190 s; 240 left iterate 75 s, 5 experiments, on 2026-12-04)
#   sa[=S]      the flagship's sparse-attention attempts (benchmarks/flagship/attempt.py as the coding agent)
#               in a fresh project through benchmarks/loop_gpu.py, one experiment an attempt, ncu on each keep
#               (default 150; ~35-55 s an experiment, ~17-25 s a profile, the independent timer's 25 s after,
#               which also times each keep's kernel against its parent's: loop_gpu.py --time-keeps);
#               SA_GUARD=G in the environment sets the project's [bench] guard for sa and satune (default 0.02);
#               SA_FROM=BUNDLE goes on in the project of an earlier call's bundle (project_*.bundle under
#               benchmarks/results/), judging only the attempts its history does not name
#   ix[=S]      the same for the top-k indexer's attempts (benchmarks/flagship/<indexer>/), IX_FROM=BUNDLE and
#               IX_GUARD=G as SA_FROM and SA_GUARD (an indexer experiment took 35-160 s on an H200, 2026-12-02)
#   satune[=S]  autogk's own tuner continuing on the project that `sa` made (its trunk the last kept attempt),
#               as a user runs `autogk iterate` with the tuner after a coding agent's changes; its independent
#               timer after (default 240; 17-35 s an experiment on sparse attention, 2026-12-02 and -07)
#   saloop[=S]  the loop on sparse attention's long-context set: a fresh project from the shipped best kernel
#               (init --workload-set long --start best) judging only SALOOP_ATTEMPTS (default 25_long_calls_row_loop,
#               comma-separated), then the independent timer on that set (default 300); SALOOP_FROM=BUNDLE goes on
#               in the long-set project an earlier saloop left; SALOOP_SETS=default,long makes a fresh
#               project judge both sets at once (init --workload-set default,long)
#   salong[=S]  the long-context set's floor share: start and best of sa's project (SA_FROM's where no sa step
#               ran) timed on the sparse-attention target's workloads_long.jsonl by loop_gpu.py's independent
#               timer, no loop run (--no-iterate --timing-workloads; default 200)
#   sacontest[=S] the same on the target's own contest-shaped set (workloads.jsonl; default 200)
#   ixlong[=S]  the same for the top-k indexer: start and best of ix's project (IX_FROM's where no ix step ran:
#               a bundle of an indexer project under benchmarks/results/) on its workloads_long.jsonl (default 200)
#   ixcontest[=S] the same on the indexer's own contest-shaped set (workloads.jsonl; default 200)
#   fixed[=S]   benchmarks/sa_fixed_cost.py on SA_KERNEL (default: the shipped best sparse-attention kernel, the flagship's
#               trunk): each kernel's CUPTI time by position after a write, a read or no flush, on rows of
#               0-64 valid ids, twice in a row, at NUM_STAGES 1, beside two small kernels (default 150)
#   stages[=S]  benchmarks/sa_stages.py on SA_KERNEL (the same default): each busy attention program's stages by
#               %globaltimer beside the launch's CUPTI duration (default 120)
#   profile[=S] benchmarks/profile_job.py, two ab jobs of PROF_TARGET (default rmsnorm_h4096), the last profiled
#               in the judge and both kernel processes (default 60)
#   probe[=S]   benchmarks/agreement_probe.py --jobs 6: the judge's per-workload ratio of the tuned rmsnorm
#               kernel against the start, job after job, beside three independent CUPTI figures (default 150;
#               78 s on an H100, 2026-12-05)
#   aa[=S]      benchmarks/aa_full.py A/A one comparison at a time (default: what is left; ~8.4 s a comparison
#               on an H100, 2026-12-06); AA_PROCS=N in the environment runs N at once on the GPU, where the
#               judge's clock sees the others' work: 84 of 132 ended TAMPERED or harness error at N=4, so it
#               is no A/A of the rule (only those that reach it count)
#   power[=S]   aa_full.py --slower 0.0309 (-3 %), one at a time (default: what is left); AA_TARGET=T in the
#               environment runs aa or power on target T (default rmsnorm_h4096). Any [bench] key can be set
#               for a step through the environment, e.g. AUTOGK_BENCH_CLOCK_NULL_WINDOW=true (each label's null
#               window: aa_summary.txt's clock lines then show the gap less it) or AUTOGK_BENCH_TIMING_MEM_MB=8192
#   clockdiag[=S] benchmarks/witness_diag.py --null-window: honest pairs on sizes 100 to 16M of the scale
#               target, the judge's clock raw and less each process's null window, beside CUPTI (default 150)
#   parallel[=S] benchmarks/parallel_throughput.py --k 1,2 -n 8 on PAR_TARGET (default rmsnorm_h4096): experiments
#               an hour and each experiment's phases (on one GPU K=2 takes turns on it: the phases, not
#               the speed-up; issue 24's figure needs a two-GPU kind) (default 300)
# Before the first step and after each one, the GPU's compute processes are listed and every stray
# judge, kernel or test process is killed (a forked judge's command line names autogk_judge, not
# autogk_git). Everything lands under /tmp/NAME and, as NAME.tgz, in OUT.
set -u
cd "$(dirname "$0")/.."
NAME=$1; BUDGET=$2; shift 2
OUT=${OUT:-$PWD/h200-call-out}
W=/tmp/$NAME; rm -rf "$W"; mkdir -p "$W" "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 AUTOGK_TRACKING_ENABLED=0
t0=$SECONDS
# The device copy's own git may name an older commit than the tree it was sent (session 48): what differs
# from that commit is listed too, so the tree a call ran can be told.
{ git log --oneline -1; echo "paths differing from that commit:"; git status --porcelain | head -40; } \
  > "$W/head.txt" 2>/dev/null
nvidia-smi -L > "$W/gpus.txt" 2>&1
sweep() {
  { echo "== $1 at $(( SECONDS - t0 )) s"
    nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader
    ps -eo pid,ppid,pcpu,etimes,args --sort=-pcpu | grep -E "autogk|pytest" | grep -v -E "grep|h200_call" | head -12
  } >> "$W/leftovers.txt" 2>&1
  # every match but this script's own ancestors: a device command line that names pytest or autogk_git
  # (a pytest run before this script, say) would otherwise be killed with the strays (2026-12-04)
  # only on a GPU machine (the device's): on a workstation the same pattern would end the person's own
  # test runs (it ended a CI run of this project's suite when tried on the dev VM, 2026-12-07)
  command -v nvidia-smi > /dev/null || return 0
  local mine=" " p=$$
  while [ "${p:-1}" -gt 1 ]; do mine="$mine$p "; p=$(ps -o ppid= -p "$p" | tr -d ' '); done
  for p in $(pgrep -f "autogk_judge|autogk_git|pytest"); do
    case "$mine" in *" $p "*) ;; *) kill -9 "$p" 2>/dev/null ;; esac
  done; sleep 1
}
left() { echo $(( BUDGET - (SECONDS - t0) )); }
log() { echo "$1 rc=$2 at $(( SECONDS - t0 )) s" | tee -a "$W/times.txt"; }
# restore BUNDLE DIR: an earlier call's project bundle (SA_FROM, IX_FROM) into DIR (its trunk, experiments and
# notes), as an absolute path: the fetch runs in the clone, where a relative one missed (session 62)
restore() {
  local from; from=$(realpath "$1" 2>/dev/null) && [ -f "$from" ] || return 1
  git clone -q "$from" "$2" && git -C "$2" fetch -q --update-head-ok "$from" '+refs/*:refs/*'
}
restore_sa() { restore "${SA_FROM:-}" "$W/saproj"; }
# STEP PROJECT: start and best of PROJECT (target $t) timed on the target's workloads_long.jsonl by loop_gpu.py's
# independent timer, no loop run, within $lim; its summary lines in STEP_summary.txt (salong, ixlong)
time_long() {
  timeout -k 5 "$lim" python3 benchmarks/loop_gpu.py --target "$t" --no-iterate --project "$2" \
    --timing-workloads "${3:-workloads_long.jsonl}" --timing-budget-s $(( lim - 70 )) --out "$W/$1" > "$W/$1.log" 2>&1
  log "$1" $?
  grep -E "mean latency|of the physical floor|geomean|agreement" "$W/$1/loop_$t.md" > "$W/$1_summary.txt" 2>/dev/null
}
# the kernel file the fixed and stages steps probe: the shipped best sparse-attention kernel (the flagship's trunk)
SA_T=dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64
IX_T=dsa_topk_indexer_fp8_h64_d128_topk2048_ps64
SA_KERNEL=${SA_KERNEL:-autogk_git/best_kernels/dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64/kernel.py}
# what the steps left, packed after each step and at the end, and on a TERM (bash runs the trap once the
# step in hand has ended): a call cut before its last step still brings back what the earlier steps made
pack() {
  tar czf "$OUT/$NAME.tgz" --exclude='kernels_*' --exclude='report_*' --exclude='saproj' --exclude='ixproj' --exclude='salproj' \
    -C /tmp "$NAME" 2>/dev/null
}
trap 'log "cut by a TERM" -; pack; exit 143' TERM INT
sweep start
for step in "$@"; do
  s=${step%%=*}; lim=${step#*=}; [ "$lim" = "$step" ] && lim=""
  L=$(left); [ "$L" -lt 40 ] && { log "$s skipped (time)" -; continue; }
  case $s in
    tests)
      lim=${lim:-480}; [ "$lim" -gt "$L" ] && lim=$L
      pt=0; python3 -c "import pytest_timeout" 2>/dev/null && pt=1
      export AUTOGK_TEST_TRACE_DIR=$W/trace  # tests that trace their job's processes write there
      # the short files first (~30 s and ~95 s on an H100, 2026-12-05): a cut then falls on the judge file's
      # tail, not on a whole file after it (the witness file got 60 s behind a 255 s judge file that day)
      files="tests/test_verdict_gpu.py tests/test_witness_gpu.py tests/test_judge_gpu.py"; k=3; rc=0; ts=$SECONDS
      for f in $files; do
        k=$(( k - 1 )); fl=$(( lim - (SECONDS - ts) - 60 * k )); [ "$fl" -lt 30 ] && { echo "$f: no time left" >> "$W/gpu_tests.txt"; continue; }
        # one test's limit under the file's, so a test cut shows its traceback and the file's summary
        to=""; [ $pt = 1 ] && { tl=$(( fl - 20 )); [ $tl -gt 180 ] && tl=180; to="--timeout=$tl"; }
        timeout -k 5 "$fl" python3 -m pytest -v -rs -o addopts= -m gpu -p no:cacheprovider --durations=25 $to \
          -k "not never_ends${TESTS_K:+ and ($TESTS_K)}" "$f" >> "$W/gpu_tests.txt" 2>&1 || rc=$?
        echo "== $f rc=$rc at $(( SECONDS - t0 )) s (limit $fl s)" >> "$W/gpu_tests.txt"
      done
      log tests $rc ;;
    never)
      lim=${lim:-360}; [ "$lim" -gt "$L" ] && lim=$L
      to=""; python3 -c "import pytest_timeout" 2>/dev/null && to="--timeout=170"
      AUTOGK_TEST_TRACE_DIR=$W/trace timeout -k 5 "$lim" python3 -m pytest -v -rs -o addopts= -m gpu \
        -p no:cacheprovider $to \
        "tests/test_witness_gpu.py::test_a_window_whose_gpu_work_never_ends_costs_its_bound_not_the_job_limit" \
        > "$W/never.txt" 2>&1
      log never $? ;;
    tuner)
      lim=${lim:-360}; [ "$lim" -gt "$L" ] && lim=$L
      AUTOGK_BENCH_PROFILE=off timeout -k 5 "$lim" python3 benchmarks/loop_gpu.py --target rmsnorm_h4096 -n 10 \
        --max-time $(( lim - 165 )) --grace 30 --wall-limit $(( lim - 5 )) --timing-budget-s 30 \
        --out "$W/tuner" > "$W/tuner.log" 2>&1
      log tuner $? ;;
    sa|ix)
      lim=${lim:-150}; [ "$lim" -gt "$L" ] && lim=$L
      if [ "$s" = sa ]; then t=$SA_T; proj=$W/saproj; from=${SA_FROM:-}; guard=${SA_GUARD:-}
      else t=$IX_T; proj=$W/ixproj; from=${IX_FROM:-}; guard=${IX_GUARD:-}; fi
      # SA_ATTEMPTS / IX_ATTEMPTS=NN_a,NN_b: only those attempts are offered (attempt.py's FLAGSHIP_ATTEMPTS); an
      # attempt whose plan says `Judged on: long` (25, 26, 28: calls of more than 64 tokens) is offered only to a
      # project holding that set (saloop's), never to this step's contest-shaped one
      only=${SA_ATTEMPTS:-}; [ "$s" = ix ] && only=${IX_ATTEMPTS:-}
      for a in benchmarks/flagship/$t/[0-9][0-9]_*.py; do
        case ",$only," in ,,|*",$(basename "$a" .py),"*) echo "$a" ;; esac
      done > "$W/${s}_attempts.txt"
      n=$(wc -l < "$W/${s}_attempts.txt")
      if [ -n "$from" ]; then
        # SA_FROM / IX_FROM=BUNDLE: go on in the project an earlier call left (its trunk, experiments and
        # notes), so the attempts its history names are not judged again; only the others are counted in -n
        restore "$from" "$proj" || { log "$s ($from not restored)" 1; continue; }
        hist=$(git -C "$proj" log --all --format=%B); n=0
        for a in $(cat "$W/${s}_attempts.txt"); do
          stem=$(basename "$a" .py); case "$hist" in *"[$stem]"*) ;; *) n=$(( n + 1 )) ;; esac
        done
        echo "restored from $from; attempts not in its history: $n" >> "$W/${s}_attempts.txt"
        [ "$n" -eq 0 ] && { log "$s (nothing new to try in $from)" 0; continue; }
      fi
      # the profile on (ncu after each keep, 17-25 s on DSA): the trunk's figures in the project for the next attempt
      # SA_GUARD / IX_GUARD=G: the project's [bench] guard (default 0.02), as a user who accepts trades sets it
      g=""; [ -n "$guard" ] && g="AUTOGK_BENCH_GUARD=$guard"
      # --wall-limit: loop_gpu.py starts no experiment later than --grace before the room it keeps for the timing
      # and the bundle; a grace of 60 s lets a usual attempt (~55 s with its ncu profile on an H100) finish
      # (session 66: without it the step's limit cut the sixth attempt's rounds, and with them the bundle
      # and the independent timing of five keeps)
      env $g AUTOGK_AGENT_SANDBOX=none FLAGSHIP_ATTEMPTS="$only" timeout -k 5 "$lim" python3 benchmarks/loop_gpu.py \
        --target $t -n "$n" --max-time $(( lim - 40 )) --grace 60 --timing-budget-s 25 --wall-limit $(( lim - 5 )) --time-keeps \
        --agent-command "python3 $PWD/benchmarks/flagship/attempt.py" --project "$proj" --out "$W/$s" \
        > "$W/$s.log" 2>&1
      log "$s" $?
      grep -E "^\| [0-9]+ \||median|agreement|geomean|reason|mean latency|of the physical floor" "$W/$s/loop_$t.md" > "$W/${s}_summary.txt" 2>/dev/null ;;
    satune)
      lim=${lim:-240}; [ "$lim" -gt "$L" ] && lim=$L
      t=$SA_T
      # without sa's project loop_gpu.py would start a fresh one from the starting kernel (session 62)
      # with no sa step, SA_FROM's project, as salong does (session 63: satune alone found none)
      [ ! -d "$W/saproj/.git" ] && [ -n "${SA_FROM:-}" ] && restore_sa
      [ -d "$W/saproj/.git" ] || { log "satune (no project from sa or SA_FROM)" 1; continue; }
      g=""; [ -n "${SA_GUARD:-}" ] && g="AUTOGK_BENCH_GUARD=$SA_GUARD"
      # grace 45: a tuner experiment on this target takes 27-35 s on an H100, so one started just before
      # --max-time ends inside it, not cut at 20 s (session 64: iterate ended rc 124 mid-experiment); the
      # read-out after iterate takes ~20 s, so --max-time leaves 85 s of the step's limit
      env $g AUTOGK_BENCH_PROFILE=off timeout -k 5 "$lim" python3 benchmarks/loop_gpu.py --target $t -n 20 \
        --max-time $(( lim - 85 )) --grace 45 --timing-budget-s 15 --project "$W/saproj" --out "$W/satune" \
        > "$W/satune.log" 2>&1
      log satune $?
      grep -E "^\| [0-9]+ \||median|agreement|geomean|reason|mean latency|of the physical floor" "$W/satune/loop_$t.md" > "$W/satune_summary.txt" 2>/dev/null ;;
    saloop)
      # the loop on the sparse attention's long-context set: a fresh project from the shipped best kernel
      # (`init --workload-set long --start best`), offering only the attempts SALOOP_ATTEMPTS names (default
      # 25_long_calls_row_loop: the calls of many tokens, which the contest-shaped set never makes), each judged
      # by autogk on the long set; the independent timer after, on the same set (default 300)
      # SALOOP_FROM=BUNDLE: go on in the long-set project an earlier saloop left; SALOOP_SETS=default,long makes a fresh
#               project judge both sets at once (init --workload-set default,long) (its trunk and experiments)
      lim=${lim:-300}; [ "$lim" -gt "$L" ] && lim=$L
      t=$SA_T; only=${SALOOP_ATTEMPTS:-25_long_calls_row_loop}
      n=$(echo "$only" | tr ',' '\n' | grep -c .)
      if [ -n "${SALOOP_FROM:-}" ]; then
        restore "$SALOOP_FROM" "$W/salproj" || { log "saloop ($SALOOP_FROM not restored)" 1; continue; }
      fi
      g=""; [ -n "${SA_GUARD:-}" ] && g="AUTOGK_BENCH_GUARD=$SA_GUARD"
      env $g AUTOGK_AGENT_SANDBOX=none FLAGSHIP_ATTEMPTS="$only" timeout -k 5 "$lim" python3 benchmarks/loop_gpu.py \
        --target $t -n "$n" --init-args "--workload-set ${SALOOP_SETS:-long} --start best" --max-time $(( lim - 60 )) --grace 90 \
        --timing-budget-s 40 --wall-limit $(( lim - 5 )) --time-keeps \
        --agent-command "python3 $PWD/benchmarks/flagship/attempt.py" --project "$W/salproj" --out "$W/saloop" \
        > "$W/saloop.log" 2>&1
      log saloop $?
      grep -E "^\| [0-9]+ \||median|agreement|geomean|reason|mean latency|of the physical floor" "$W/saloop/loop_$t.md" \
        > "$W/saloop_summary.txt" 2>/dev/null ;;
    salong)
      # the long-context set's floor share: start and best of sa's project (or SA_FROM's) timed by loop_gpu.py's
      # independent timer on the target's workloads_long.jsonl, no loop run
      lim=${lim:-200}; [ "$lim" -gt "$L" ] && lim=$L
      t=$SA_T
      [ ! -d "$W/saproj/.git" ] && [ -n "${SA_FROM:-}" ] && restore_sa
      [ -d "$W/saproj/.git" ] || { log "salong (no project from sa or SA_FROM)" 1; continue; }
      time_long salong "$W/saproj" ;;
    sacontest)
      # the same on the target's own (contest-shaped) set: start and best of sa's project (or SA_FROM's) by
      # loop_gpu.py's independent timer, no loop run: the mean latency on a GPU the project was not judged on
      lim=${lim:-200}; [ "$lim" -gt "$L" ] && lim=$L
      t=$SA_T
      [ ! -d "$W/saproj/.git" ] && [ -n "${SA_FROM:-}" ] && restore_sa
      [ -d "$W/saproj/.git" ] || { log "sacontest (no project from sa or SA_FROM)" 1; continue; }
      time_long sacontest "$W/saproj" workloads.jsonl ;;
    ixlong|ixcontest)
      # start and best of the ix step's project (IX_FROM's where no ix step ran) on the indexer's long set
      # (ixlong) or its own contest-shaped set (ixcontest), by loop_gpu.py's independent timer, no loop run
      lim=${lim:-200}; [ "$lim" -gt "$L" ] && lim=$L
      t=$IX_T
      [ ! -d "$W/ixproj/.git" ] && [ -n "${IX_FROM:-}" ] && restore "$IX_FROM" "$W/ixproj"
      [ -d "$W/ixproj/.git" ] || { log "$s (no project from ix or IX_FROM)" 1; continue; }
      wl=workloads_long.jsonl; [ "$s" = ixcontest ] && wl=workloads.jsonl
      time_long "$s" "$W/ixproj" $wl ;;
    fixed)
      lim=${lim:-150}; [ "$lim" -gt "$L" ] && lim=$L
      timeout -k 5 "$lim" python3 benchmarks/sa_fixed_cost.py "$SA_KERNEL" --out "$W/fixed.json" > "$W/fixed.log" 2>&1
      log fixed $? ;;
    stages)
      lim=${lim:-120}; [ "$lim" -gt "$L" ] && lim=$L
      timeout -k 5 "$lim" python3 benchmarks/sa_stages.py "$SA_KERNEL" --out "$W/stages.json" > "$W/stages.log" 2>&1
      log stages $? ;;
    profile)
      lim=${lim:-60}; [ "$lim" -gt "$L" ] && lim=$L
      timeout -k 5 "$lim" python3 benchmarks/profile_job.py --out "$W/prof" --target "${PROF_TARGET:-rmsnorm_h4096}" --runs 2 \
        --top 20 > "$W/prof.log" 2>&1
      log profile $? ;;
    probe)
      lim=${lim:-150}; [ "$lim" -gt "$L" ] && lim=$L
      timeout -k 5 "$lim" python3 benchmarks/agreement_probe.py --out "$W/probe" --jobs 6 > "$W/probe.log" 2>&1
      log probe $? ;;
    aa|power)
      lim=${lim:-$L}; [ "$lim" -gt "$L" ] && lim=$L
      extra=""; [ "$s" = power ] && extra="--slower 0.0309"
      AUTOGK_AGENT_SANDBOX=none AUTOGK_BENCH_PROFILE=off timeout -k 5 "$lim" python3 benchmarks/aa_full.py \
        --out "$W/$s" --gpus 0 --procs "${AA_PROCS:-1}" --budget-s $(( lim - 30 )) --backend local \
        --target "${AA_TARGET:-rmsnorm_h4096}" $extra > "$W/$s.log" 2>&1
      log "$s" $?
      python3 benchmarks/aa_full.py --summarize "$W/$s" > "$W/${s}_summary.txt" 2>&1 ;;
    clockdiag)
      lim=${lim:-150}; [ "$lim" -gt "$L" ] && lim=$L
      PYTHONPATH=$PWD timeout -k 5 "$lim" python3 benchmarks/witness_diag.py --out "$W/clockdiag" --rounds 6 \
        --null-window > "$W/clockdiag.log" 2>&1
      log clockdiag $? ;;
    parallel)
      lim=${lim:-300}; [ "$lim" -gt "$L" ] && lim=$L
      timeout -k 5 "$lim" python3 benchmarks/parallel_throughput.py --k 1,2 -n 8 --target "${PAR_TARGET:-rmsnorm_h4096}" \
        --out "$W/parallel" > "$W/parallel.log" 2>&1
      log parallel $? ;;
    *) log "unknown step $s" - ;;
  esac
  sweep "after $s"
  pack  # after each step: a call cut later (a SIGKILL at the device's limit) keeps what this one made
done
pack
cat "$W/times.txt"
[ -f "$W/gpu_tests.txt" ] && grep -E "PASSED|FAILED|SKIPPED|XFAIL|ERROR|passed|failed" "$W/gpu_tests.txt" | tail -25
grep -c "^== " "$W/leftovers.txt"; grep -v -E "^==" "$W/leftovers.txt" | head -8
[ -f "$W/tuner.log" ] && tail -15 "$W/tuner.log"
[ -f "$W/probe.log" ] && tail -13 "$W/probe.log"
[ -f "$W/prof.log" ] && head -c 2500 "$W/prof.log"
for s in sa ix; do [ -f "$W/${s}_summary.txt" ] && cut -c1-600 "$W/${s}_summary.txt"; done
for s in salong sacontest ixlong ixcontest; do [ -f "$W/${s}_summary.txt" ] && { echo "== $s"; cut -c1-300 "$W/${s}_summary.txt"; }; done
[ -f "$W/satune_summary.txt" ] && cut -c1-400 "$W/satune_summary.txt"
[ -f "$W/clockdiag.log" ] && grep -E "n=" "$W/clockdiag.log" | cut -c1-300
[ -f "$W/parallel.log" ] && grep -v "^   #" "$W/parallel.log" | tail -8
for s in aa power; do [ -f "$W/${s}_summary.txt" ] && tail -8 "$W/${s}_summary.txt"; done
exit 0
