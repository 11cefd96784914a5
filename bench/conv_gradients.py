"""Where a CNN training step's time goes on the CPU, per convolution of dlbench's CNN (batch
64, 32×32 images): the forward pass, the gradient of the input and that of the kernel, in
JAX under jax.jit (NHWC, as Flax's nn.Conv: XLA's convolution), in JAX with dlbench's
convolution (dlbench.frameworks.jax.conv: the kernel's gradient as GEMMs, as its CNN runs
on the CPU) and in PyTorch (NCHW, as its Conv2d), side by side in one run; a gradient is
the backward pass alone, without the forward. Each in a process of its own, with the same
number of threads.

    .venv/bin/python bench/conv_gradients.py [--threads 2] [--batch 64]

Prints the best of 7 calls after two warm ones, in ms, per layer and operation (the best:
a neighbour's load only ever slows a call; still, run it on an idle machine), and the
totals a training step pays: every layer's forward and kernel gradient, and the input
gradients of all but the first layer (no gradient flows into the images).
"""

import argparse
import json
import os
import subprocess
import sys

from dlbench.catalogue.models.vision import MODELS

CNN = MODELS["cnn"]
# (input channels, output channels, side) of the CNN's four convolutions: pooled (halved)
# after every second one, as dlbench.catalogue.models.vision lays them out.
LAYERS = [(CNN.channels[i], CNN.channels[i + 1], CNN.image_size // 2 ** (i // 2))
          for i in range(4)]
OPERATIONS = ("forward", "input gradient", "kernel gradient")

JAX = """
import jax, jax.numpy as jnp, numpy as np
from jax import lax
def conv(x, w):
    return lax.conv_general_dilated(x, w, (1, 1), "SAME",
                                    dimension_numbers=("NHWC", "HWIO", "NHWC"))
def calls(batch, k, cin, cout, side):
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.standard_normal((batch, side, side, cin), np.float32))
    w = jnp.asarray(rng.standard_normal((k, k, cin, cout), np.float32))
    g = jnp.ones((batch, side, side, cout), jnp.float32)
    # The backward pass alone: the forward's result is not needed (XLA drops it).
    grad = lambda of: jax.jit(lambda x, w, g: jax.vjp(conv, x, w)[1](g)[of])
    fns = [jax.jit(conv), grad(0), grad(1)]
    args = [(x, w), (x, w, g), (x, w, g)]
    return [lambda f=f, a=a: jax.block_until_ready(f(*a)) for f, a in zip(fns, args, strict=True)]
"""

# The same calls through dlbench's convolution (its kernel gradient as GEMMs).
JAX_GEMM = JAX + """
from dlbench.frameworks.jax.conv import conv
"""

TORCH = """
import torch
def calls(batch, k, cin, cout, side):
    torch.manual_seed(0)
    x = torch.randn(batch, cin, side, side)
    w = torch.randn(cout, cin, k, k)
    conv = lambda x, w: torch.nn.functional.conv2d(x, w, padding="same")
    def grad(of):  # the backward pass alone: the forward is run once, its graph kept
        x_, w_ = x.clone().requires_grad_(of == 0), w.clone().requires_grad_(of == 1)
        out = conv(x_, w_)
        g = torch.ones_like(out)
        return lambda: torch.autograd.grad(out, (x_, w_)[of], g, retain_graph=True)
    def forward():
        with torch.no_grad():
            conv(x, w)
    return [forward, grad(0), grad(1)]
"""

TIMING = """
import json, sys, time
def best_ms(call):
    for _ in range(2):
        call()
    times = []
    for _ in range(7):
        start = time.perf_counter()
        call()
        times.append((time.perf_counter() - start) * 1e3)
    return min(times)
batch, kernel, layers = int(sys.argv[1]), int(sys.argv[2]), json.loads(sys.argv[3])
print(json.dumps([[best_ms(c) for c in calls(batch, kernel, *layer)] for layer in layers]))
"""


def measure(code: str, threads: int, batch: int) -> list[list[float]]:
    env = {**os.environ, "PJRT_NPROC": str(threads), "OMP_NUM_THREADS": str(threads),
           "XLA_FLAGS": "--xla_force_host_platform_device_count=1"}
    done = subprocess.run([sys.executable, "-c", code + TIMING, str(batch), str(CNN.kernel),
                           json.dumps(LAYERS)],
                          capture_output=True, text=True, env=env, check=True)
    return json.loads(done.stdout.splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch", type=int, default=64)
    args = parser.parse_args()
    runs = {"JAX ms": measure(JAX, args.threads, args.batch),
            "JAX GEMM ms": measure(JAX_GEMM, args.threads, args.batch),
            "PyTorch ms": measure(TORCH, args.threads, args.batch)}
    print(f"{'layer':<18}{'operation':<17}" + "".join(f"{name:>13}" for name in runs)
          + f"{'GEMM/PyTorch':>14}")
    rows = zip(LAYERS, *runs.values(), strict=True)
    for (cin, cout, side), *layer in rows:
        for i, operation in enumerate(OPERATIONS):
            figures = [ms[i] for ms in layer]
            print(f"{f'{cin}->{cout} {side}x{side}':<18}{operation:<17}"
                  + "".join(f"{f:>13.1f}" for f in figures) + f"{figures[1] / figures[2]:>14.2f}")
    skip = (0, 1, 0)  # the first layer's input gradient: not computed in training
    for i, operation in enumerate(OPERATIONS):
        totals = [sum(row[i] for row in ms[skip[i]:]) for ms in runs.values()]
        print(f"{'a training step':<18}{operation:<17}" + "".join(f"{t:>13.1f}" for t in totals)
              + f"{totals[1] / totals[2]:>14.2f}")


if __name__ == "__main__":
    main()
