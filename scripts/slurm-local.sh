#!/usr/bin/env bash
# A single-node SLURM cluster on 127.0.0.1 for tests and benchmarks: munged, slurmctld and slurmd,
# every file (config, key, state, spool, logs, sockets) under one folder, free ports, no systemd.
#
#   bash scripts/slurm-local.sh start DIR   # prints `export SLURM_CONF=DIR/slurm.conf`; waits until idle
#   bash scripts/slurm-local.sh stop DIR    # ends the three daemons (by their pid files)
#
# Needs root (slurmd runs jobs as their submitter; SlurmUser=root) and the Debian packages
# slurm-wlm and munge (`apt-get install -y slurm-wlm munge`).
set -euo pipefail
cmd=${1:?usage: slurm-local.sh start|stop DIR}
dir=$(mkdir -p "${2:?usage: slurm-local.sh start|stop DIR}" && cd "$2" && pwd)

stop() {
  for name in slurmd slurmctld munged; do
    pidf="$dir/$name.pid"
    [ -f "$pidf" ] || continue
    pid=$(cat "$pidf" 2>/dev/null || true)
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$pidf"
  done
}

if [ "$cmd" = stop ]; then stop; exit 0; fi
[ "$cmd" = start ] || { echo "usage: slurm-local.sh start|stop DIR" >&2; exit 2; }
for exe in munged slurmctld slurmd sinfo; do
  command -v "$exe" >/dev/null || { echo "error: $exe not found; run: apt-get install -y slurm-wlm munge" >&2; exit 3; }
done
[ "$(id -u)" = 0 ] || { echo "error: the local cluster runs its daemons as root (SlurmUser=root); run as root" >&2; exit 3; }
stop
mkdir -p "$dir/state" "$dir/spool" "$dir/munge"
chmod 700 "$dir/munge"
# munged refuses a key readable by others; a fresh one per cluster keeps clusters apart.
[ -f "$dir/munge/munge.key" ] || { head -c 1024 /dev/urandom > "$dir/munge/munge.key"; chmod 400 "$dir/munge/munge.key"; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
ctld_port=$(free_port); d_port=$(free_port)
read -r cpus mem < <(slurmd -C | awk '/NodeName/ {for (i=1;i<=NF;i++) {split($i,a,"="); v[a[1]]=a[2]} print v["CPUs"], v["RealMemory"]}')
cat > "$dir/slurm.conf" <<CONF
ClusterName=autogk
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$d_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/pgid
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
# Faults show at once: a job past its limit is ended after 1 s, not 30; a lost node is noticed in 30 s.
KillWait=1
OverTimeLimit=0
SlurmdTimeout=30
InactiveLimit=0
MinJobAge=300
JobRequeue=0
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=1
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=cpu Nodes=localhost Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
CONF
munged --force -S "$dir/munge/munge.socket" --key-file "$dir/munge/munge.key" --pid-file "$dir/munged.pid" \
  --log-file "$dir/munged.log" --seed-file "$dir/munge/seed"
export SLURM_CONF="$dir/slurm.conf"
slurmctld -f "$SLURM_CONF"
slurmd -f "$SLURM_CONF" -N localhost
for _ in $(seq 120); do
  state=$(sinfo -h -n localhost -o %T 2>/dev/null || true)
  case "$state" in idle*|mixed*|allocated*) echo "export SLURM_CONF=$SLURM_CONF"; exit 0;; esac
  sleep 0.5
done
echo "error: the node did not come up (state: ${state:-none}); see $dir/slurmctld.log and $dir/slurmd.log" >&2
exit 1
