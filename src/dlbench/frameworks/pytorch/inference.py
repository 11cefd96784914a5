"""PyTorch inference: transformers' PyTorch classes; eager, TorchScript (trace) and
torch.compile in any mode, each in fp32 or under bf16/fp16 autocast."""

import contextlib
import os
import tempfile
from pathlib import Path

import numpy as np
import torch
import transformers

from dlbench.frameworks.pytorch import InductorCaches, PyTorchBackend
from dlbench.models import ModelSpec
from dlbench.optimizations import Optimization

_AUTOCAST = {"bf16": torch.bfloat16, "fp16": torch.float16}


class PyTorchInference:
    def __init__(self, backend: PyTorchBackend):
        self.backend = backend
        self.device = backend.device
        self.caches = InductorCaches()
        self.recipes = {
            "eager": self._eager,
            "torchscript": self._torchscript,
            "compile": self._compile,
            "compile-max-autotune": self._compile,
            "compile-reduce-overhead": self._compile,
        }

    # -- model and inputs ----------------------------------------------------------------

    def build(self, spec: ModelSpec, seed: int, optimization: Optimization,
              weights: Path | None = None) -> torch.nn.Module:
        """The model on the device, ready for inference: the weights from a safetensors file
        written by `dlbench.reference` if given, else random from the seed."""
        config = getattr(transformers, spec.classes.config_class)(**spec.params)
        model_class = getattr(transformers, spec.classes.pytorch_class)
        if weights is None:
            torch.manual_seed(seed)
            model = model_class(config)
        else:
            if not Path(weights).is_file():
                raise FileNotFoundError(f"weights file {weights} does not exist")
            model, info = model_class.from_pretrained(
                Path(weights).parent, config=config, local_files_only=True,
                use_safetensors=True, output_loading_info=True,
            )
            _check_loading(info, weights)
        return model.eval().to(self.device)

    def save_weights(self, model: torch.nn.Module, path: Path) -> None:
        """Write the model's weights as `path` (model.safetensors), readable without torch."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=path.parent, prefix=".weights-") as tmp:
            model.save_pretrained(tmp, safe_serialization=True, max_shard_size="1000GB")
            os.replace(Path(tmp) / "config.json", path.with_name("config.json"))
            weights = Path(tmp) / "model.safetensors"
            from dlbench.result import default_file_mode

            os.chmod(weights, default_file_mode())  # safetensors makes it private (0600)
            os.replace(weights, path)

    def inputs(self, token_ids: np.ndarray) -> dict:
        ids = torch.from_numpy(token_ids).to(self.device)
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}

    def to_numpy(self, output: torch.Tensor) -> np.ndarray:
        return output.detach().float().cpu().numpy()

    def versions(self) -> dict[str, str]:
        return {"transformers": transformers.__version__}

    # -- recipes: each returns the step to time ------------------------------------------

    def _context(self, optimization: Optimization):
        """inference_mode, and autocast in a reduced precision."""
        dtype = _AUTOCAST.get(optimization.precision.name)

        @contextlib.contextmanager
        def context():
            with torch.inference_mode():
                if dtype is None:
                    yield
                else:
                    with torch.autocast(self.device.type, dtype=dtype):
                        yield

        return context

    @staticmethod
    def _step(forward, context):
        def step():
            with context():
                return forward()

        return step

    def _eager(self, model, inputs: dict, optimization: Optimization):
        return self._step(lambda: model(**inputs).last_hidden_state, self._context(optimization))

    def _torchscript(self, model, inputs: dict, optimization: Optimization):
        context = self._context(optimization)
        # The attention mask is all ones (and the ids ordinary tokens, none of them
        # padding), which eager transformers code skips at run time but a trace would bake
        # in as mask arithmetic (and GPT-2's mask builder cannot be traced at all in
        # transformers 4.57): the trace takes the token ids only.
        ids = inputs["input_ids"]
        with context():  # under autocast the trace records the casts
            # check_trace would run the model twice more: the reference check is ours.
            traced = torch.jit.trace(_LastHiddenState(model), check_trace=False,
                                     example_kwarg_inputs={"input_ids": ids})
        return self._step(lambda: traced(input_ids=ids), context)

    def _compile(self, model, inputs: dict, optimization: Optimization):
        self.caches.fresh()
        compiled = torch.compile(model, mode=optimization.recipe.compile_mode)
        return self._step(lambda: compiled(**inputs).last_hidden_state,
                          self._context(optimization))

    # -- the end of a cell ---------------------------------------------------------------

    def release(self) -> None:
        """Leave the process as the cell found it (compile caches, environment)."""
        self.caches.release()


class _LastHiddenState(torch.nn.Module):
    """The model as a function of the token ids with one tensor as its output: what the
    trace records, without model-output objects or caches, which a trace cannot return."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=input_ids).last_hidden_state


def _check_loading(info: dict, weights: Path) -> None:
    problems = {k: v for k, v in info.items() if k != "error_msgs" and v}
    if problems or info.get("error_msgs"):
        raise ValueError(f"{weights} does not fit the model: {info}")


def make_ops(backend: PyTorchBackend) -> PyTorchInference:
    return PyTorchInference(backend)
