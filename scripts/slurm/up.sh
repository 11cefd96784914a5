#!/usr/bin/env bash
# Bring up a real single-node SLURM on this machine, for tests: munged, slurmctld and slurmd
# from Debian's packages, with fake GPU devices so that jobs asking for `--gpus=1` can be
# scheduled on a machine without one. Needs root on Debian (no systemd needed), and the
# packages slurmctld, slurmd, slurm-client and munge: `scripts/setup.sh --test` installs them.
#   scripts/slurm/up.sh [SCRATCH]   (default /tmp/dlbench-slurm)
#   scripts/slurm/down.sh [SCRATCH] stops exactly the daemons this started and cleans up.
# Everything (state, spool, logs, pid files, munge socket, fake devices) lives under SCRATCH;
# /etc/slurm/slurm.conf and gres.conf (the client commands' default paths) are written, and
# any existing ones are saved under SCRATCH and put back by down.sh.
# Environment: SLURM_FAKE_GPUS (default 2) fake GPUs, SLURM_UP_TIMEOUT (default 60) seconds
# to wait for the node to become idle.
set -euo pipefail

SCRATCH=${1:-/tmp/dlbench-slurm}
GPUS=${SLURM_FAKE_GPUS:-2}
TIMEOUT=${SLURM_UP_TIMEOUT:-60}
PACKAGES=(slurmctld slurmd slurm-client munge)
ETC=/etc/slurm

say() { echo "slurm-up: $*" >&2; }
die() { say "$*"; exit 1; }

[[ $(id -u) -eq 0 ]] || die "needs root (it starts slurmd as root)"
[[ -f /etc/debian_version ]] || die "needs Debian (it runs Debian's slurm packages)"
[[ -e "$SCRATCH/pids" ]] && die "$SCRATCH/pids exists: a cluster is up; run scripts/slurm/down.sh $SCRATCH"

# --- packages: installed up front by scripts/setup.sh --test; checked here, each on its own ---
missing=()
for package in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2> /dev/null | grep -q " ok installed$" || missing+=("$package")
done
((${#missing[@]} == 0)) \
  || die "missing Debian packages: ${missing[*]}; install them with scripts/setup.sh --test"
for tool in munged slurmctld slurmd sinfo sbatch squeue scontrol; do
  command -v "$tool" > /dev/null || die "$tool not found, although ${PACKAGES[*]} are installed"
done

# --- scratch layout ---------------------------------------------------------------------------
install -d -m 0755 "$SCRATCH"
SCRATCH=$(cd "$SCRATCH" && pwd)
install -d -m 0755 "$SCRATCH"/{state,spool,log,run,dev,etc-backup}
install -d -m 0755 -o munge -g munge "$SCRATCH/munge"  # clients need x on the socket dir
: > "$SCRATCH/pids"  # "name pid" lines, written as each daemon starts; down.sh reads them

# Fake GPUs: character devices that are /dev/null clones (gres needs device files).
for ((i = 0; i < GPUS; i++)); do
  mknod -m 0666 "$SCRATCH/dev/fakegpu$i" c 1 3
done

# --- munge, on its own socket so that a system munged (if any) is left alone -------------------
KEY=/etc/munge/munge.key
if [[ ! -s $KEY ]]; then
  install -d -m 0700 -o munge -g munge /etc/munge
  dd if=/dev/urandom of="$KEY" bs=1024 count=1 status=none
  chown munge:munge "$KEY" && chmod 0400 "$KEY"
fi
SOCKET="$SCRATCH/munge/munge.socket"
runuser -u munge -- /usr/sbin/munged --socket="$SOCKET" --key-file="$KEY" \
  --pid-file="$SCRATCH/munge/munged.pid" --log-file="$SCRATCH/munge/munged.log" \
  --seed-file="$SCRATCH/munge/munged.seed"
echo "munged $(cat "$SCRATCH/munge/munged.pid")" >> "$SCRATCH/pids"

# --- configuration ----------------------------------------------------------------------------
HOST=$(hostname -s)
install -d -m 0755 "$ETC"
for file in slurm.conf gres.conf; do
  [[ -e "$ETC/$file" ]] && cp -a "$ETC/$file" "$SCRATCH/etc-backup/$file"
done
# The node as slurmd sees it (CPUs, sockets, cores, memory), plus its address and the fake GPUs.
NODE=$(slurmd -C | head -n 1)
[[ $NODE == NodeName=* ]] || die "unexpected 'slurmd -C' output: $NODE"
NODE="NodeName=$HOST ${NODE#NodeName=* } NodeAddr=127.0.0.1 Gres=gpu:$GPUS State=UNKNOWN"

cat > "$ETC/slurm.conf" << EOF
# Written by dlbench's scripts/slurm/up.sh for a test cluster; down.sh removes it.
ClusterName=dlbench
SlurmctldHost=$HOST(127.0.0.1)
SlurmUser=root
AuthType=auth/munge
AuthInfo=socket=$SOCKET
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=1024
ReturnToService=2
# Finished jobs stay visible to squeue/scontrol this long: the executor's squeue status
# command needs at least 3 x its first status wait.
MinJobAge=600
MailProg=/bin/true
GresTypes=gpu
SlurmctldPidFile=$SCRATCH/run/slurmctld.pid
SlurmdPidFile=$SCRATCH/run/slurmd.pid
StateSaveLocation=$SCRATCH/state
SlurmdSpoolDir=$SCRATCH/spool
SlurmctldLogFile=$SCRATCH/log/slurmctld.log
SlurmdLogFile=$SCRATCH/log/slurmd.log
SchedulerType=sched/backfill
$NODE
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
cat > "$ETC/gres.conf" << EOF
# Written by dlbench's scripts/slurm/up.sh: fake GPUs (character devices, /dev/null clones).
AutoDetect=off
NodeName=$HOST Name=gpu File=$SCRATCH/dev/fakegpu[0-$((GPUS - 1))]
EOF

# --- daemons ----------------------------------------------------------------------------------
wait_pidfile() {  # name file: record the pid the daemon wrote, or fail
  local name=$1 file=$2
  for _ in $(seq 50); do
    if [[ -s $file ]]; then echo "$name $(cat "$file")" >> "$SCRATCH/pids"; return; fi
    sleep 0.1
  done
  die "$name wrote no pid file ($file); see $SCRATCH/log"
}
slurmctld -i
wait_pidfile slurmctld "$SCRATCH/run/slurmctld.pid"
slurmd
wait_pidfile slurmd "$SCRATCH/run/slurmd.pid"

# --- wait until the node is idle --------------------------------------------------------------
deadline=$((SECONDS + TIMEOUT))
while :; do
  state=$(sinfo -h -N -n "$HOST" -o %T 2> /dev/null | head -n 1 || true)
  case $state in
    idle) break ;;
    *drain* | *inval* | *down*) scontrol update nodename="$HOST" state=resume 2> /dev/null || true ;;
  esac
  ((SECONDS < deadline)) || die "node $HOST not idle after ${TIMEOUT}s (state '${state}'); see $SCRATCH/log"
  sleep 0.5
done
say "up: node $HOST idle, $GPUS fake GPUs, partition debug; pids in $SCRATCH/pids"
