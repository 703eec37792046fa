#!/usr/bin/env bash
# A real, private, single-node Slurm on this machine, for testing the job scripts in jobs/.
#
#   bash jobs/slurm_local.sh start [DIR]   # installs the packages if missing, starts the daemons
#   source DIR/env.sh                      # points sbatch/srun/squeue/sinfo at this cluster
#   bash jobs/slurm_local.sh stop  [DIR]   # cancels its jobs, stops exactly the daemons it started
#
# DIR (default $NOEIRA_SLURM_DIR or /tmp/noeira-slurm) holds everything: slurm.conf, the state,
# spool and log directories, the pid files and a private munge socket. Nothing under /etc is
# changed and no system service is touched, so it also runs beside a site's own Slurm or munge:
# its own munged (own socket, the system key) and free ports next to 6817/6818.
#
# Needs root: slurmd runs jobs as the submitting user and munged must run as user munge.
set -euo pipefail

usage() {
  echo "usage: $0 start|stop|status [DIR]" >&2
  exit 2
}

[ $# -ge 1 ] || usage
cmd=$1
dir=${2:-${NOEIRA_SLURM_DIR:-/tmp/noeira-slurm}}

log() { echo "slurm_local: $*"; }
die() {
  echo "slurm_local: error: $*" >&2
  exit 1
}

# The pid in a pid file, if that process is alive and is the expected program (a pid file left by
# a dead daemon may name an unrelated process by now).
live_pid() {
  local file=$1 name=$2 pid
  [ -s "$file" ] || return 1
  pid=$(tr -dc 0-9 <"$file")
  [ -n "$pid" ] && [ -r "/proc/$pid/comm" ] || return 1
  [ "$(cat "/proc/$pid/comm")" = "$name" ] || return 1
  echo "$pid"
}

install_packages() {
  local pkgs=(slurmctld slurmd slurm-client munge) missing=() p
  for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  log "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # Debian's maintainer scripts try to start the services; policy-rc.d usually forbids that in
  # containers, and a started system slurmctld would not use our configuration anyway.
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# First port p >= $1 such that p and p+1 are both free on 127.0.0.1 (slurmctld, slurmd).
free_port_pair() {
  local p=$1
  for _ in $(seq 1 50); do
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null &&
      ! (exec 3<>"/dev/tcp/127.0.0.1/$((p + 1))") 2>/dev/null; then
      echo "$p"
      return 0
    fi
    p=$((p + 2))
  done
  die "no free port pair found from $1 on"
}

start_munge() {
  if live_pid "$dir/munge/munged.pid" munged >/dev/null; then return 0; fi
  local key=/etc/munge/munge.key
  if [ ! -r "$key" ]; then
    key=$dir/munge/munge.key
    dd if=/dev/urandom of="$key" bs=1 count=1024 status=none
    chown munge:munge "$key"
    chmod 0400 "$key"
  fi
  # munged runs as user munge and insists that its socket directory is owned by it.
  runuser -u munge -- /usr/sbin/munged --socket="$dir/munge/munge.socket" \
    --pid-file="$dir/munge/munged.pid" --seed-file="$dir/munge/munged.seed" \
    --log-file="$dir/munge/munged.log" --key-file="$key"
  for _ in $(seq 1 50); do
    [ -S "$dir/munge/munge.socket" ] && return 0
    sleep 0.1
  done
  die "munged did not create its socket; see $dir/munge/munged.log"
}

write_conf() {
  local host node name port
  host=$(hostname -s)
  # slurmd -C prints this machine's CPUs, sockets, cores, threads and memory as a NodeName line,
  # under the name slurmd will look itself up by.
  node=$(slurmd -C | head -n 1)
  [[ $node == NodeName=* ]] || die "slurmd -C printed no NodeName line: $node"
  name=${node#NodeName=}
  name=${name%% *}
  echo "$name" >"$dir/etc/node"
  port=$(free_port_pair "${NOEIRA_SLURM_PORT:-6817}")
  cat >"$dir/etc/slurm.conf" <<EOF
# Written by jobs/slurm_local.sh: a private single-node cluster for testing job scripts.
ClusterName=noeira-local
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$dir/state
# Job ids restart at 1 with every fresh cluster; the PMIx plugin names its per-step directories
# after them under TmpFS (default /tmp), so a private TmpFS keeps clusters from colliding.
TmpFS=$dir/tmp
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
# One line per finished job with its exit code: what sacct would show with a database.
JobCompType=jobcomp/filetxt
JobCompLoc=$dir/log/jobcomp.log
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
MpiDefault=pmix
ReturnToService=2
# Keep finished jobs in scontrol's view for an hour (their ExitCode is what the tests read).
MinJobAge=3600
KillWait=30
MailProg=/bin/true
$node NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=local Nodes=$name Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF
}

wait_idle() {
  local node state
  node=$(cat "$dir/etc/node")
  for _ in $(seq 1 300); do
    state=$(sinfo -h -n "$node" -o %T 2>/dev/null || true)
    if [ "$state" = idle ]; then return 0; fi
    sleep 0.1
  done
  die "node $node is not idle after 30 s (sinfo: '${state:-no answer}'); logs in $dir/log"
}

start() {
  [ "$(id -u)" -eq 0 ] || die "needs root (slurmd and munged)"
  if live_pid "$dir/run/slurmctld.pid" slurmctld >/dev/null; then
    log "already running in $dir"
    return 0
  fi
  install_packages
  mkdir -p "$dir"/{etc,state,spool,run,log,munge,tmp}
  # munged (user munge) must reach its socket through $dir.
  chmod 0755 "$dir"
  chown munge:munge "$dir/munge"
  chmod 0755 "$dir/munge"
  start_munge
  write_conf
  echo "export SLURM_CONF=$dir/etc/slurm.conf" >"$dir/env.sh"
  export SLURM_CONF=$dir/etc/slurm.conf
  # -c: ignore any saved state of an earlier run in the same DIR.
  slurmctld -c
  slurmd
  wait_idle
  log "up: $(sinfo -h -o '%P %D node(s) %c CPUs %T') ; source $dir/env.sh"
}

stop() {
  local pid name file
  if [ -s "$dir/etc/slurm.conf" ] && live_pid "$dir/run/slurmctld.pid" slurmctld >/dev/null; then
    export SLURM_CONF=$dir/etc/slurm.conf
    # Cancel the jobs first so that their step daemons (slurmstepd, which outlive slurmd) end
    # with them; wait until the node has finished cleaning up (KillWait is 30 s).
    local jobs state
    jobs=$(squeue -h -o %i 2>/dev/null || true)
    # shellcheck disable=SC2086  # one argument per job id
    [ -z "$jobs" ] || scancel $jobs 2>/dev/null || true
    for _ in $(seq 1 400); do
      state=$(sinfo -h -o %T 2>/dev/null || true)
      [ -z "$(squeue -h -o %i 2>/dev/null)" ] && [ "$state" = idle ] && break
      sleep 0.1
    done
  fi
  for entry in "slurmd:$dir/run/slurmd.pid" "slurmctld:$dir/run/slurmctld.pid" \
    "munged:$dir/munge/munged.pid"; do
    name=${entry%%:*}
    file=${entry#*:}
    pid=$(live_pid "$file" "$name") || continue
    kill -TERM "$pid"
    for _ in $(seq 1 100); do
      [ -d "/proc/$pid" ] || break
      sleep 0.1
    done
    if [ -d "/proc/$pid" ]; then kill -KILL "$pid"; fi
    log "stopped $name ($pid)"
  done
}

status() {
  local name pid
  for entry in "munged:$dir/munge/munged.pid" "slurmctld:$dir/run/slurmctld.pid" \
    "slurmd:$dir/run/slurmd.pid"; do
    name=${entry%%:*}
    if pid=$(live_pid "${entry#*:}" "$name"); then echo "$name running ($pid)"; else echo "$name stopped"; fi
  done
}

case $cmd in
  start) start ;;
  stop) stop ;;
  status) status ;;
  *) usage ;;
esac
