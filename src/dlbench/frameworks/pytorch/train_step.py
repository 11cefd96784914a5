"""PyTorch training steps of the registry's transformers: the model of the inference
operations (the shared weights), a language-model loss on a tied head, the optimizer of the
training scenarios, and the step cut into forward + loss + backward and the optimizer step,
under each recipe (eager, compile, compile-step, foreach, fused) and precision (bf16/fp16
autocast, with a gradient scaler in fp16)."""

# The backend first: it sets the environment that transformers and the framework read
# when they load.
from dlbench.frameworks.pytorch.backend import InductorCaches, PyTorchBackend  # isort: split

import numpy as np
import torch
import torch.nn.functional as F

from dlbench.catalogue.models import ModelSpec
from dlbench.catalogue.optimizers import Optimizer
from dlbench.catalogue.recipes import Optimization
from dlbench.frameworks.pytorch import dynamo
from dlbench.frameworks.pytorch.inference import PyTorchInference
from dlbench.frameworks.pytorch.training import make_optimizer
from dlbench.measure.parts import StepParts

_AUTOCAST = {"bf16": torch.bfloat16, "fp16": torch.float16}
FORWARD_BACKWARD, OPTIMIZER, WHOLE = "forward_backward", "optimizer", "step"


def lm_loss(model: torch.nn.Module, input_ids: torch.Tensor,
            attention_mask: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of the tied language-model head (the last hidden state times the
    word embeddings, transposed) against the input token ids; computed in float32."""
    hidden = model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
    logits = hidden @ model.get_input_embeddings().weight.T
    return F.cross_entropy(logits.float().flatten(0, 1), input_ids.flatten())


class PyTorchTrainStep:
    def __init__(self, backend: PyTorchBackend):
        self.backend = backend
        self.device = backend.device
        self.models = PyTorchInference(backend)  # build (the shared weights) and inputs
        self.caches = InductorCaches()
        self._compiled = False

    # -- model, inputs and optimizer ---------------------------------------------------------

    def build(self, spec: ModelSpec, seed: int, optimization: Optimization,
              weights=None) -> torch.nn.Module:
        """The model on the device in training mode (dropout on), float32 weights."""
        return self.models.build(spec, seed, optimization, weights).train()

    def inputs(self, token_ids: np.ndarray) -> dict:
        return self.models.inputs(token_ids)

    def optimizer(self, model: torch.nn.Module, optimizer: Optimizer, learning_rate: float,
                  optimization: Optimization) -> torch.optim.Optimizer:
        return make_optimizer(model, optimizer, learning_rate, optimization)

    def implementation(self, opt: torch.optim.Optimizer,
                       optimization: Optimization) -> str:
        """Which implementation of the update runs, in words."""
        if opt.defaults.get("fused"):
            kind = "fused (one kernel per parameter group and dtype)"
        elif opt.defaults.get("foreach"):
            kind = "foreach (multi-tensor kernels over all parameters)"
        elif self.device.type == "cuda":
            kind = "foreach (PyTorch's default on CUDA)"
        else:
            kind = "for-loop over the parameters from Python (PyTorch's default on the CPU)"
        if optimization.recipe.name == "compile-step":
            return f"compiled into the step by torch.compile, traced from the {kind}"
        return kind

    def word_embeddings(self, model: torch.nn.Module) -> np.ndarray:
        return model.get_input_embeddings().weight.detach().float().cpu().numpy()

    def _autocast(self, optimization: Optimization) -> torch.autocast:
        """A fresh autocast context in the cell's precision (disabled in fp32)."""
        dtype = _AUTOCAST.get(optimization.precision.name)
        return torch.autocast(self.device.type, dtype=dtype, enabled=dtype is not None)

    def initial_loss(self, model: torch.nn.Module, inputs: dict,
                     optimization: Optimization) -> float:
        """The loss before training, dropout off, in the cell's precision."""
        model.eval()
        try:
            with torch.no_grad(), self._autocast(optimization):
                return float(lm_loss(model, **inputs))
        finally:
            model.train()

    # -- the step ----------------------------------------------------------------------------

    def train_step(self, model: torch.nn.Module, opt: torch.optim.Optimizer, inputs: dict,
                   optimization: Optimization) -> StepParts:
        """The step in parts: forward, loss and backward (the loss, a device tensor, not
        read); then the optimizer step. compile-step compiles both as one: one part."""
        recipe = optimization.recipe.name
        fp16 = optimization.precision.name == "fp16"
        scaler = torch.amp.GradScaler(self.device.type) if fp16 else None
        if recipe.startswith("compile"):
            self.caches.fresh()
            dynamo.start()
            self._compiled = True
        loss_of = lm_loss
        if recipe == "compile":
            loss_of = torch.compile(lm_loss)

        def forward_backward(input_ids, attention_mask):
            opt.zero_grad(set_to_none=True)
            with self._autocast(optimization):
                loss = loss_of(model, input_ids, attention_mask)
            (loss if scaler is None else scaler.scale(loss)).backward()
            return loss.detach()

        def optimizer_step():
            if scaler is None:
                opt.step()
            else:  # unscale, skip the step on inf/NaN gradients, adapt the scale
                scaler.step(opt)
                scaler.update()

        ids, mask = inputs["input_ids"], inputs["attention_mask"]
        if recipe == "compile-step":
            def whole(input_ids, attention_mask):
                loss = forward_backward(input_ids, attention_mask)
                optimizer_step()
                return loss

            compiled = torch.compile(whole)
            return StepParts({WHOLE: lambda: compiled(ids, mask)},
                        "torch.compile of the whole step (forward, loss, backward and the "
                        "optimizer step): timed as a whole, its parts are not separable")
        how = ("forward, loss and backward (zero_grad first); then optimizer.step()"
               + (", through the gradient scaler" if scaler else "")
               + (" — torch.compile of the model and loss; the optimizer step eager"
                  if recipe == "compile" else ""))
        return StepParts({FORWARD_BACKWARD: lambda: forward_backward(ids, mask),
                     OPTIMIZER: optimizer_step}, how)

    def compilation(self) -> dict | None:
        """torch.compile's graphs, breaks and recompilations so far (None uncompiled)."""
        return dynamo.compilation() if self._compiled else None

    def losses(self, outputs: list) -> list[float]:
        """The losses the steps returned, as numbers (read once, after the loop)."""
        return torch.stack(outputs).float().cpu().tolist() if outputs else []

    def versions(self) -> dict[str, str]:
        return self.models.versions()

    def release(self) -> None:
        """Leave the process as the cell found it (compile caches, environment)."""
        self.caches.release()
        self.models.release()


def make_ops(backend: PyTorchBackend) -> PyTorchTrainStep:
    return PyTorchTrainStep(backend)
