"""Why a job was stopped, as its scheduler tells it. SIGTERM is how SLURM stops a job, for
`scancel` and for its time limit alike; while the job is still completing, `scontrol show
job` says which (Reason=TimeLimit for the time limit, none for a cancel)."""

import os
import re
import subprocess

SIGTERM_REASON = ("stopped: the job received SIGTERM (cancelled, or past the scheduler's "
                  "time limit)")


def stop_reason() -> str:
    """Why this job received SIGTERM: SLURM's reason inside a SLURM job, else the signal."""
    job = os.environ.get("SLURM_JOB_ID")
    if not job:
        return SIGTERM_REASON
    try:
        shown = subprocess.run(["scontrol", "-o", "show", "job", job], capture_output=True,
                               text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return SIGTERM_REASON
    return slurm_reason(job, dict(re.findall(r"(\w+)=(\S*)", shown)))


def slurm_reason(job: str, fields: dict[str, str]) -> str:
    """The reason of a stop from `scontrol show job`'s fields."""
    reason = fields.get("Reason")
    if reason == "TimeLimit":
        why = f"reached its time limit ({fields.get('TimeLimit', '?')})"
    elif reason in (None, "None"):
        why = "was cancelled (scancel)"
    else:
        why = f"was stopped ({reason})"
    return f"stopped by SLURM: job {job} {why} and received SIGTERM"
