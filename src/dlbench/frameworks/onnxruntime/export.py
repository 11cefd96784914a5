"""The ONNX model that ONNX Runtime's cells run: PyTorch's model with the shared weights
(results/reference/<model>/model.safetensors), exported by torch.onnx's exporter
(torch.export, then ONNX; dynamic in batch and sequence length) once per weights file and
attention implementation, and kept beside the weights (`model-<attention>.onnx`, with a
JSON file saying how and in how long it was made) for every cell after it.

The export runs in a PyTorch process of its own (python -m
dlbench.frameworks.onnxruntime.export), started by the first ONNX Runtime cell that needs
it: torch never enters a measuring process of ONNX Runtime, whose memory is then its own.
A lock beside the file keeps two cells (SLURM jobs on one file system) from exporting at
once; the file is written whole or not at all; an export of other weights (the reference
made again) is made again.

Why not torch.onnx's older TorchScript exporter: it traced tiny-bert's graph at its example
length, and the exported model's output at another length was off by 2.4 (the dynamo
exporter's by 6e-7; 2026-11-29, torch 2.13).
"""

import argparse
import ctypes
import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from dlbench.catalogue import frameworks
from dlbench.files import scratch
from dlbench.files.atomic import replacing, write_json_atomic
from dlbench.measure import env

OUTPUT = "last_hidden_state"
INPUTS = ("input_ids", "attention_mask")
# torch.onnx.export's other choices, as recorded beside the model.
EXPORTER = "torch.onnx.export(dynamo=True, optimize=False), opset of the exporter's default"
# What makes the graph besides the weights: a new version of one exports it again.
EXPORTING_PACKAGES = ("torch", "transformers", "onnx", "onnxscript")
# Exports of random weights (no weights file: `dlbench run` without --weights), one per
# model, seed and attention, reused by later processes as those beside the weights are.
SCRATCH = scratch.shared() / "dlbench-onnx"
_PR_SET_PDEATHSIG = 1  # prctl's option, from <linux/prctl.h>


def exported(model: str, seed: int, weights: Path | None, attention: str, threads: int
             ) -> tuple[Path, dict]:
    """The ONNX model of these weights (random from `seed` without a file) and how it was
    made (`reused`: an earlier process had made it): beside the weights, or in SCRATCH
    without them; exported now if it is missing or was made from anything else (other
    weights, model parameters, attention or exporting packages)."""
    if weights is None:
        path = SCRATCH / f"{model}-seed{seed}-{attention}.onnx"
    else:
        path = Path(weights).with_name(f"model-{attention}.onnx")
    path.parent.mkdir(parents=True, exist_ok=True)
    about = path.with_suffix(".json")
    source = _source(weights, model, seed, attention)
    with open(path.with_suffix(".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        made = json.loads(about.read_text()) if about.is_file() and path.is_file() else None
        reused = made is not None and made.get("source") == source
        if not reused:
            for left in path.parent.glob(f".{path.name}.*.tmp"):  # of an export killed
                left.unlink(missing_ok=True)
            command = [sys.executable, "-m", __name__, "--model", model, "--seed", str(seed),
                       "--attention", attention, "--threads", str(threads), "--out", str(path)]
            if weights is not None:
                command += ["--weights", str(weights)]
            # It dies with its cell (a timeout kills the cell's process, not its children).
            run = subprocess.run(command, capture_output=True, text=True,
                                 preexec_fn=_die_with_parent)
            if run.returncode != 0:
                raise RuntimeError(f"exporting {model} to ONNX failed ({' '.join(command)}):\n"
                                   f"{run.stderr[-3000:]}")
            made = json.loads(about.read_text())
    return path, {**made, "reused": reused}


def _die_with_parent() -> None:
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _source(weights: Path | None, model: str, seed: int, attention: str) -> dict:
    """What the export is made from: the weights file as it is (its size and modification
    time: a reference made again is another file) or the seed, the model's parameters, the
    attention, and the exporting packages' versions."""
    from dlbench.catalogue.models import get_model

    made_from = ({"seed": seed} if weights is None else
                 {"weights": str(Path(weights).resolve()), "size": Path(weights).stat().st_size,
                  "mtime_ns": Path(weights).stat().st_mtime_ns})
    return {**made_from, "model": model, "params": dict(get_model(model).params),
            "attention": attention, "exporter": EXPORTER,
            "packages": {name: env.version(name) for name in EXPORTING_PACKAGES}}


def export(model: str, seed: int, weights: Path | None, attention: str, threads: int,
           out: Path) -> None:
    """In a PyTorch process: build the model as PyTorch's cells do and export it (the
    time recorded from the exporter's imports to the file written)."""
    start = time.perf_counter()
    import torch

    from dlbench.catalogue import recipes
    from dlbench.catalogue.models import get_model
    from dlbench.frameworks import load_backend, load_ops

    ops = load_ops(load_backend(frameworks.REFERENCE_FRAMEWORK, "cpu", threads, 1), "inference")
    eager = recipes.optimization("inference", "eager", frameworks.REFERENCE_FRAMEWORK)
    built = ops.build(get_model(model), seed, eager, weights, attention=attention)

    class LastHiddenState(torch.nn.Module):
        """The model's output that every framework's inference cell returns."""

        def __init__(self, inner: torch.nn.Module):
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask):
            return self.inner(input_ids=input_ids, attention_mask=attention_mask)[0]

    ids = torch.ones((2, 16), dtype=torch.long)  # sizes of 0 or 1 would be taken as fixed
    batch, length = torch.export.Dim("batch"), torch.export.Dim("sequence")
    shapes = {name: {0: batch, 1: length} for name in INPUTS}
    with replacing(out) as tmp, torch.no_grad():
        # optimize=False: the graph as the model computes it; ONNX Runtime's recipes are
        # its own optimization levels. One file (weights inside: < 2 GB for these models).
        torch.onnx.export(LastHiddenState(built).eval(), (ids, torch.ones_like(ids)), str(tmp),
                          input_names=list(INPUTS), output_names=[OUTPUT], dynamo=True,
                          dynamic_shapes=shapes, optimize=False, external_data=False)
    write_json_atomic(out.with_suffix(".json"), {
        "export_s": time.perf_counter() - start, "exporter": EXPORTER,
        "torch": torch.__version__, "attention": attention,
        "source": _source(weights, model, seed, attention), "bytes": out.stat().st_size})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dlbench.frameworks.onnxruntime.export",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--weights", type=Path)
    parser.add_argument("--attention", default="eager", choices=["eager", "sdpa"])
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args(argv)
    # A PyTorch process with ONNX's exporter. Before, transformers imported scikit-learn,
    # and it JAX: tiny-bert's `export_s` 9.3-11.1 s, 6.5 s without (2026-12-01).
    frameworks.leave_out_unused_imports(frameworks.REFERENCE_FRAMEWORK,
                                        keep=EXPORTING_PACKAGES)
    export(args.model, args.seed, args.weights, args.attention, args.threads, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
