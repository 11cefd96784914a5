"""The shared artefacts of the correctness check, made once and read by every cell.

- `weights`: the seeded PyTorch model's weights as safetensors, once per model: PyTorch
  cells load them, and so do TensorFlow cells, without importing torch.
- `output`: PyTorch eager in fp32 on the CPU, on those weights and the cells' token ids,
  once per (model, batch, length): the reference every cell's output is compared with.
- `generation`: the ids that PyTorch eager fp32 generates greedily on the CPU from those
  weights and the seeded prompt, once per (model, batch, prompt length, new tokens): the
  reference of every generation cell, token for token.

Both hold the CPU's device lock while they compute, so that they never overlap a timing
cell. Usage: python -m dlbench.reference weights|output … (the workflow's reference rules).
"""

import argparse
import sys
import time
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, cast

from dlbench.catalogue import frameworks, recipes
from dlbench.catalogue.models import MODELS, get_model
from dlbench.measure import devices, env

if TYPE_CHECKING:
    from dlbench.scenarios.inference_ops import ReferenceOps

def _fp32_eager() -> recipes.Optimization:
    """What the reference runs: the reference framework eager in fp32 (on the CPU)."""
    from dlbench.catalogue.frameworks import REFERENCE_FRAMEWORK

    return recipes.optimization("inference", "eager", REFERENCE_FRAMEWORK)


@cache
def _ops(threads: int) -> "ReferenceOps":
    """The reference framework's (PyTorch's) inference operations on the CPU (once per
    process: thread pools are set only once)."""
    env.set_thread_variables(threads)
    from dlbench.catalogue.frameworks import REFERENCE_FRAMEWORK
    from dlbench.frameworks import load_backend, load_ops

    ops = load_ops(load_backend(REFERENCE_FRAMEWORK, "cpu", threads, 1), "inference")
    return cast("ReferenceOps", ops)  # it writes the shared weights, too (a test checks)


def write_weights(model: str, seed: int, out: Path, threads: int) -> None:
    with devices.exclusive("cpu"):
        ops = _ops(threads)
        ops.save_weights(ops.build(get_model(model), seed, _fp32_eager()), out)


def write_output(model: str, batch: int, seqlen: int, seed: int, weights: Path, out: Path,
                 threads: int) -> None:
    from dlbench.measure.correctness import save_reference
    from dlbench.scenarios.inference import prepare, token_ids

    spec = get_model(model)
    ids = token_ids(spec, batch, seqlen, seed)
    with devices.exclusive("cpu"):
        ops = _ops(threads)
        eager = _fp32_eager()
        built = ops.build(spec, seed, eager, weights)
        output = ops.to_numpy(prepare(ops, built, ops.inputs(ids), eager)())
    save_reference(out, output, ids, dict(spec.params))


def write_generation(model: str, batch: int, prompt: int, new_tokens: int, seed: int,
                     weights: Path, out: Path, threads: int) -> None:
    """The generation scenario's reference: the ids that the reference framework's eager
    fp32 greedy generation gives (dlbench.scenarios.generation)."""
    from dlbench.measure.correctness import save_reference
    from dlbench.scenarios.generation import reference_ids

    env.set_thread_variables(threads)
    with devices.exclusive("cpu"):
        ids, prompt_ids = reference_ids(model, batch, prompt, new_tokens, seed, weights,
                                        threads)
    save_reference(out, ids, prompt_ids, dict(get_model(model).params))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dlbench.reference", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    for name in ("weights", "output", "generation"):
        sub = commands.add_parser(name)
        sub.add_argument("--model", required=True, choices=list(MODELS))
        sub.add_argument("--seed", type=int, default=0)
        sub.add_argument("--threads", type=int, default=2)
        sub.add_argument("--out", required=True, type=Path)
        if name in ("output", "generation"):
            sub.add_argument("--batch", required=True, type=int)
            sub.add_argument("--seqlen", required=True, type=int,
                             help="the sequence length (generation: the prompt's)")
            sub.add_argument("--weights", required=True, type=Path)
        if name == "generation":
            sub.add_argument("--new-tokens", required=True, type=int)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    # A process of the reference framework alone.
    frameworks.leave_out_unused_imports(frameworks.REFERENCE_FRAMEWORK)
    if args.command == "weights":
        write_weights(args.model, args.seed, args.out, args.threads)
    elif args.command == "generation":
        write_generation(args.model, args.batch, args.seqlen, args.new_tokens, args.seed,
                         args.weights, args.out, args.threads)
    else:
        write_output(args.model, args.batch, args.seqlen, args.seed, args.weights, args.out,
                     args.threads)
    print(f"{args.out}: written in {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
