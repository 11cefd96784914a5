"""Flags that mean something (issue 38: 29 of 32 cells flagged on an idle machine): the same
three real cells — BERT base in PyTorch at batch 1, lengths 16, 32 and 64, one process as a
group, the default's 1.5-s loops — measured on the idle machine and beside a real process
spinning on a core. Idle, a noise flag is rare (at most one of the three); under the load,
every cell is flagged busy, with the cores the others took in its reason, and is slower
than idle. The fixed workload timed beside each cell (the machine's own noise,
dlbench.measure.noise) is no reliable sign of the load, neither its time nor its spread: in
a slow hour here the idle workload spread by 7.7% of its median and the loaded one by 6.6%;
a product took 0.42 ms idle and 5.6-8.0 ms loaded in that run, 0.36 and 0.42 ms in another,
and 0.63-0.65 idle against 0.57-0.65 ms loaded in a third (2026-12-01, the suite's run,
while the cells were 2.2-3.9 times as slow), where a check that it took longer failed: the
busy flag, from the cores the others took, is what tells the load. On CI's machine
the idle cells' IQR came out at 15-20% of their median, against a fixed limit of 10% (3 of 3
flagged unstable; 3-7% here); then at three times the machine's own noise, 16% against a
limit of 12% beside the workload's 4.1% (2 of 3 flagged, 2026-12-01): idle, a cell's spread
reaches up to ~7 times the workload's, and the limit is now eight times it."""

import json
import subprocess
import sys

import pytest

from dlbench.measure.flags import NOISE
from tests.conftest import tool_env

pytestmark = [pytest.mark.slow, pytest.mark.alone]


def _group(tmp_path, name: str) -> list[dict]:
    out = tmp_path / name
    done = subprocess.run(
        [sys.executable, "-m", "dlbench", "run", "--framework=pytorch",
         "--model=bert-base-uncased", "--device=cpu", "--batch", "1", "--seqlen", "16", "32",
         "64", "--optimization=eager", "--min-duration-s=1.5", "--min-iterations=6",
         "--target-ci=0", f"--out-dir={out}"],
        capture_output=True, text=True, timeout=600, env=tool_env())
    assert done.returncode == 0, done.stderr[-3000:]
    records = [json.loads(p.read_text()) for p in sorted(out.glob("*.json"))]
    assert len(records) == 3 and all(r["status"] == "ok" for r in records)
    return records


def _noisy(record: dict) -> bool:
    return any(record["flags"][name] for name in NOISE)


def _seen(records: list[dict]) -> list[str]:
    """What a failure shows, a line a cell: its spread against the machine's beside it,
    its iterations, the load and theft the supervisor saw, and its flags' reasons."""
    lines = []
    for r in records:
        timing, use = r["timing"], r["utilization"] or {}
        beside = (r.get("machine_noise") or {}).get("relative_iqr")
        lines.append(f"{r['cell_id']}: IQR {timing['relative_iqr']:.3f} beside {beside} "
                     f"({timing['iterations']} iterations, median {timing['median_ms']:.1f} "
                     f"ms); other load {use.get('other_load_cores')} cores, steal "
                     f"{use.get('steal_fraction')}; {r['environment'].get('cpu_model')}; "
                     f"{r['flags']['reasons']}")
    return lines


def test_flags_are_rare_on_an_idle_machine_and_common_under_load(tmp_path):
    idle = _group(tmp_path, "idle")
    assert sum(_noisy(r) for r in idle) <= 1, _seen(idle)
    assert all(r["utilization"]["other_load_cores"] < 0.25 for r in idle), _seen(idle)
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        loaded = _group(tmp_path, "loaded")
    finally:
        spinner.kill()
        spinner.wait()
    assert all(r["flags"]["busy_machine"] for r in loaded), _seen(loaded)
    assert [r["cell_id"] for r in loaded] == [r["cell_id"] for r in idle]
    assert all(busy["timing"]["median_ms"] > quiet["timing"]["median_ms"]
               for quiet, busy in zip(idle, loaded, strict=True)), (_seen(idle), _seen(loaded))
    assert all(any(reason.startswith("busy machine: other processes kept")
                   for reason in r["flags"]["reasons"]) for r in loaded)
