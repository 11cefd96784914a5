"""Running dlbench cells from the bench scripts: the real CLI, one process per call."""

import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run_cell(framework: str, model: str, batch: int, seqlen: int, optimization: str,
             *options: str, device: str = "cpu") -> dict:
    """`dlbench run` on one cell; its result record."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "runs" / "cell.json"
        subprocess.run(
            [sys.executable, "-m", "dlbench", "run", f"--framework={framework}",
             f"--model={model}", f"--device={device}", f"--batch={batch}",
             f"--seqlen={seqlen}", f"--optimization={optimization}", f"--out={out}",
             *options],
            check=True, capture_output=True, text=True,
        )
        record = json.loads(out.read_text())
    if record["status"] != "ok":
        raise RuntimeError(f"{record['cell_id']}: {record['status']} ({record['reason']})")
    return record


def label(framework: str, model: str, batch: int, seqlen: int, optimization: str) -> str:
    return f"{framework} {model} b{batch} s{seqlen} {optimization}"
