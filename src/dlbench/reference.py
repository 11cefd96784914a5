"""The shared artefacts of the correctness check, made once and read by every cell.

- `weights`: the seeded PyTorch model's weights as safetensors, once per model: PyTorch
  cells load them, and so do TensorFlow cells, without importing torch.
- `output`: PyTorch eager in fp32 on the CPU, on those weights and the cells' token ids,
  once per (model, batch, length): the reference every cell's output is compared with.
- `outputs`: every `output` and `generation` of a run in one process (the workflow's
  `references` rule): the import and each model's building paid once.
- `generation`: the ids that PyTorch eager fp32 generates greedily on the CPU from those
  weights and the seeded prompt, once per (model, batch, prompt length, new tokens): the
  reference of every generation cell, token for token.

Both hold the CPU's device lock while they compute, so that they never overlap a timing
cell. Usage: python -m dlbench.reference weights|outputs|output|generation … (the workflow's
reference rules: weights, then outputs).
"""

import argparse
import sys
import time
from functools import cache, lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, cast

from dlbench.catalogue import recipes
from dlbench.catalogue.models import MODELS, get_model
from dlbench.frameworks import registry
from dlbench.measure import env
from dlbench.run import devices

if TYPE_CHECKING:
    from dlbench.scenarios.inference_ops import ReferenceOps

def _fp32_eager() -> recipes.Optimization:
    """What the reference runs: the reference framework eager in fp32 (on the CPU)."""
    from dlbench.frameworks.registry import REFERENCE_FRAMEWORK

    return recipes.optimization("inference", "eager", REFERENCE_FRAMEWORK)


@cache
def _backend(threads: int):
    """The reference framework's (PyTorch's) backend on the CPU, once per process: thread
    pools are set only once."""
    env.set_thread_variables(threads)
    from dlbench.frameworks import load_backend
    from dlbench.frameworks.registry import REFERENCE_FRAMEWORK

    return load_backend(REFERENCE_FRAMEWORK, "cpu", threads, 1)


@cache
def _ops(threads: int) -> "ReferenceOps":
    """The reference framework's inference operations on the CPU."""
    from dlbench.frameworks import load_ops

    ops = load_ops(_backend(threads), "inference")
    return cast("ReferenceOps", ops)  # it writes the shared weights, too (a test checks)


def write_weights(model: str, seed: int, out: Path, threads: int) -> None:
    with devices.exclusive("cpu"):
        ops = _ops(threads)
        ops.save_weights(ops.build(get_model(model), seed, _fp32_eager()), out)


@lru_cache(maxsize=1)  # the model of the cases before (ordered by model): one at a time
def _built(model: str, seed: int, weights: Path, threads: int):
    """A model of the reference's, built from its shared weights once for its outputs."""
    return _ops(threads).build(get_model(model), seed, _fp32_eager(), weights)


def write_output(model: str, batch: int, seqlen: int, seed: int, weights: Path, out: Path,
                 threads: int) -> None:
    from dlbench.measure.correctness import save_reference
    from dlbench.scenarios.inference import prepare, token_ids

    spec = get_model(model)
    ids = token_ids(spec, batch, seqlen, seed)
    with devices.exclusive("cpu"):
        ops = _ops(threads)
        eager = _fp32_eager()
        built = _built(model, seed, Path(weights), threads)
        output = ops.to_numpy(prepare(ops, built, ops.inputs(ids), eager)())
    save_reference(out, output, ids, dict(spec.params))


def write_generation(model: str, batch: int, prompt: int, new_tokens: int, seed: int,
                     weights: Path, out: Path, threads: int) -> None:
    """The generation scenario's reference: the ids that the reference framework's eager
    fp32 greedy generation gives (dlbench.scenarios.generation)."""
    from dlbench.measure.correctness import save_reference
    from dlbench.scenarios.generation import reference_ids

    with devices.exclusive("cpu"):
        ids, prompt_ids = reference_ids(model, batch, prompt, new_tokens, seed, weights,
                                        _backend(threads))
    save_reference(out, ids, prompt_ids, dict(get_model(model).params))


def write_outputs(cases: list[str], seed: int, threads: int) -> list[Path]:
    """Every reference of a run in one process (the workflow's `references` rule): each
    case `output:<model>:<batch>:<length>` or `generation:<model>:<batch>:<prompt>:<new
    tokens>`, written where dlbench.plan.paths puts it, from its model's shared weights —
    the reference framework imported once, each model built once for its outputs."""
    from dlbench.plan import paths

    written = []
    for case in sorted(cases, key=lambda case: case.split(":")[1]):
        kind, model, *sizes = case.split(":")
        numbers = [int(n) for n in sizes]
        weights = Path(paths.weights(model))
        if kind == "output":
            out = Path(paths.reference_output(model, *numbers))
            write_output(model, *numbers, seed, weights, out, threads)
        elif kind == "generation":
            out = Path(paths.reference_generation(model, *numbers))
            write_generation(model, *numbers, seed, weights, out, threads)
        else:
            raise ValueError(f"{case}: not a reference case (output:… or generation:…)")
        written.append(out)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dlbench.reference", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    outputs = commands.add_parser("outputs", help="every reference of a run, in one process")
    outputs.add_argument("cases", nargs="+",
                         help="output:<model>:<batch>:<length> or generation:<model>:<batch>:"
                         "<prompt>:<new tokens>, each written where the workflow reads it")
    outputs.add_argument("--seed", type=int, default=0)
    outputs.add_argument("--threads", type=int, default=2)
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
    registry.leave_out_unused_imports(registry.REFERENCE_FRAMEWORK)
    if args.command == "outputs":
        written = write_outputs(args.cases, args.seed, args.threads)
        print("\n".join(map(str, written)))
        print(f"{len(written)} references written in {time.perf_counter() - start:.1f} s")
        return 0
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
