#!/usr/bin/env bash
# Tear down the test cluster that scripts/slurm/up.sh started: cancel its jobs, stop exactly
# the daemons it recorded (by pid, never by name), put back /etc/slurm's files and remove
# the scratch directory. Safe to run after a partial bring-up, and twice.
#   scripts/slurm/down.sh [SCRATCH]   (default /tmp/dlbench-slurm)
set -uo pipefail

SCRATCH=${1:-/tmp/dlbench-slurm}
ETC=/etc/slurm
say() { echo "slurm-down: $*" >&2; }

[[ -d $SCRATCH ]] || { say "nothing to do ($SCRATCH does not exist)"; exit 0; }
SCRATCH=$(cd "$SCRATCH" && pwd)

alive() {  # pid name: is pid still the process that was started under this name?
  [[ -r /proc/$1/comm && $(cat "/proc/$1/comm" 2> /dev/null) == "$2" ]]
}

ours=0
grep -qs "scripts/slurm/up.sh" "$ETC/slurm.conf" && grep -qs "$SCRATCH/" "$ETC/slurm.conf" && ours=1

# Jobs of this cluster first, while slurmctld still answers (their steps run under slurmstepd).
if ((ours)) && [[ -s $SCRATCH/pids ]]; then
  jobs=$(timeout 10 squeue -h -o %i 2> /dev/null || true)
  if [[ -n $jobs ]]; then
    # shellcheck disable=SC2086
    timeout 10 scancel $jobs 2> /dev/null || true
    for _ in $(seq 20); do
      [[ -z $(timeout 5 squeue -h -t RUNNING,COMPLETING -o %i 2> /dev/null) ]] && break
      sleep 0.5
    done
  fi
fi

# Daemons in reverse start order: slurmd, slurmctld, munged.
if [[ -s $SCRATCH/pids ]]; then
  tac "$SCRATCH/pids" | while read -r name pid; do
    [[ $pid =~ ^[0-9]+$ ]] || continue
    alive "$pid" "$name" || continue
    kill -TERM "$pid" 2> /dev/null
    for _ in $(seq 50); do alive "$pid" "$name" || break; sleep 0.1; done
    if alive "$pid" "$name"; then
      say "$name ($pid) ignored SIGTERM; killing it"
      kill -KILL "$pid" 2> /dev/null
    fi
  done
fi

# Configuration: put back what up.sh saved, or remove what it wrote.
if ((ours)); then
  for file in slurm.conf gres.conf; do
    if [[ -e $SCRATCH/etc-backup/$file ]]; then
      cp -a "$SCRATCH/etc-backup/$file" "$ETC/$file"
    else
      rm -f "$ETC/$file"
    fi
  done
fi
rm -rf "$SCRATCH"
say "down: stopped the recorded daemons and removed $SCRATCH"
