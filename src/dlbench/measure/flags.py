"""The stability flags of a cell and their thresholds, in one place: the harness sets the
flags when it measures, the analysis recomputes them from the stored figures."""

UNSTABLE_RELATIVE_IQR = 0.10  # a cell whose IQR exceeds this fraction of its median
NOISY_STEAL_FRACTION = 0.05  # a cell measured while the host stole more of the CPU


def flags(relative_iqr: float, windows: list[dict | None]) -> dict:
    """The flags of a cell from the relative IQR of its samples and the supervisor's
    utilization windows of its timed loops (one per process; None where unsampled)."""
    steal = max((w["steal_fraction"] for w in windows if w), default=None)
    unstable = relative_iqr > UNSTABLE_RELATIVE_IQR
    noisy = steal is not None and steal > NOISY_STEAL_FRACTION
    reasons = []
    if unstable:
        reasons.append(f"unstable: IQR is {relative_iqr:.0%} of the median "
                       f"(limit {UNSTABLE_RELATIVE_IQR:.0%})")
    if noisy:
        reasons.append(f"noisy machine: {steal:.0%} of the CPU time was stolen by the host "
                       f"(limit {NOISY_STEAL_FRACTION:.0%}); re-run this cell")
    return {"unstable": unstable, "noisy_machine": noisy, "reasons": reasons}
