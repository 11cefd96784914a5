"""The CPU's theoretical float32 peak, where /proc/cpuinfo tells enough to compute it:

    cores used × FMA units per core × float32 lanes per unit × 2 FLOPs × clock

- lanes: the widest FMA instructions the flags name (avx512f: 512 bits, avx2 or avx with
  fma: 256), capped at the width of the units that execute them where the
  microarchitecture is known (Zen 4 splits a 512-bit operation over its 256-bit units);
- FMA units: 2 for the AMD Zen cores, known from the CPU family and model; otherwise
  assumed 2 (Intel's big cores since Haswell; some Xeon models have 1 AVX-512 unit);
- cores: the thread count, at most the physical cores (SMT siblings share the units);
- clock: the maximum clock from cpufreq where the kernel exposes it; otherwise the
  `cpu MHz` of /proc/cpuinfo, which in a virtual machine is the host's nominal clock,
  not the boost clock the cores may run at: the figure is then labelled "at the nominal
  clock" and a measured rate above it says the cores run faster.

Only float32 is modelled; another precision, a CPU without FMA or a missing clock is
"unknown", with the reason. Each assumption is written into the result.
"""

from pathlib import Path

_MAX_FREQ = Path("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")

# AMD families and model ranges: (name, FMA units per core, bits per unit).
_AMD = {
    0x17: [(range(0x00, 0x30), "Zen/Zen+", 2, 128), (range(0x30, 0x100), "Zen 2", 2, 256)],
    0x19: [(range(0x10, 0x20), "Zen 4", 2, 256), (range(0x60, 0x80), "Zen 4", 2, 256),
           (range(0xa0, 0xb0), "Zen 4", 2, 256), (range(0x00, 0x100), "Zen 3", 2, 256)],
    0x1a: [(range(0x00, 0x100), "Zen 5", 2, 512)],
}


def _fields(cpuinfo: str) -> dict[str, str]:
    """The first processor's `key: value` lines."""
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        if not line.strip():
            if fields:
                break
            continue
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    return fields


def _physical_cores(cpuinfo: str, fields: dict[str, str]) -> int:
    pairs = {(block.get("physical id"), block.get("core id"))
             for block in map(_fields, cpuinfo.split("\n\n")) if block}
    if all(core is not None for _, core in pairs) and pairs:
        return len(pairs)
    return int(fields.get("cpu cores", 0)) or len(pairs) or 1


def _units(fields: dict[str, str]) -> tuple[int, int | None, str]:
    """FMA units, their width in bits (None: as wide as the instructions) and where that
    comes from."""
    family, model = int(fields.get("cpu family", -1)), int(fields.get("model", -1))
    if fields.get("vendor_id") == "AuthenticAMD":
        for models, name, units, bits in _AMD.get(family, []):
            if model in models:
                return units, bits, (f"{name} (AMD family {family:#x}, model {model:#x}): "
                                     f"{units} FMA units of {bits} bits per core")
    return 2, None, "assumed 2 FMA units per core (the microarchitecture is not in the table)"


def cpu_fp32(cpuinfo: str, threads: int, max_mhz: float | None = None) -> dict:
    """The theoretical float32 peak of `threads` threads from /proc/cpuinfo's text (and
    the maximum clock in MHz where cpufreq gives one): `gflops` (None where unknown),
    `label` ('at the maximum clock', 'at the nominal clock' or 'unknown'), the factors,
    and `assumptions` (or `reason`) in words."""
    fields = _fields(cpuinfo)
    flags = set(fields.get("flags", "").split())
    unknown = {"gflops": None, "label": "unknown"}
    if "avx512f" in flags:
        isa_bits = 512
    elif "fma" in flags and ("avx2" in flags or "avx" in flags):
        isa_bits = 256
    else:
        return unknown | {"reason": "the CPU's flags name no FMA vector instructions "
                                    "(fma with avx/avx2, or avx512f)"}
    units, unit_bits, units_source = _units(fields)
    bits = min(isa_bits, unit_bits or isa_bits)
    cores = _physical_cores(cpuinfo, fields)
    used = min(threads, cores)
    if max_mhz:
        mhz, label = max_mhz, "at the maximum clock"
        clock_source = "cpufreq's cpuinfo_max_freq"
    elif fields.get("cpu MHz"):
        mhz, label = float(fields["cpu MHz"]), "at the nominal clock"
        clock_source = ("/proc/cpuinfo `cpu MHz`" + (
            ": in a virtual machine the host's nominal clock; the cores may boost above it"
            if "hypervisor" in flags else ": the clock when it was read"))
    else:
        return unknown | {"reason": "the clock cannot be read (no cpufreq, no `cpu MHz`)"}
    lanes = bits // 32
    gflops = used * units * lanes * 2 * mhz / 1e3
    return {"gflops": gflops, "label": label, "cores": used, "physical_cores": cores,
            "fma_units": units, "vector_bits": bits, "fp32_lanes": lanes, "clock_mhz": mhz,
            "formula": f"{used} cores × {units} FMA units × {lanes} float32 lanes × 2 FLOP "
                       f"× {mhz:,.0f} MHz",
            "assumptions": [f"vector width: {isa_bits}-bit instructions from the flags, "
                            f"executed {bits} bits at a time",
                            f"FMA units: {units_source}",
                            f"cores: {used} of {cores} physical (threads {threads})",
                            f"clock: {clock_source}"]}


def read_cpu_fp32(threads: int) -> dict:
    """`cpu_fp32` of this machine."""
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
    except OSError:
        return {"gflops": None, "label": "unknown", "reason": "no /proc/cpuinfo"}
    try:
        max_mhz = int(_MAX_FREQ.read_text()) / 1e3
    except (OSError, ValueError):
        max_mhz = None
    return cpu_fp32(cpuinfo, threads, max_mhz)
