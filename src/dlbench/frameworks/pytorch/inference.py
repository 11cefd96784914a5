"""PyTorch inference: transformers' PyTorch classes; eager, TorchScript (trace) and
torch.compile in any mode, each in fp32, tf32 or under bf16/fp16 autocast.

Every recipe does the same attention work. transformers' SDPA attention skips an all-ones
attention mask when it runs eagerly (a data-dependent check), but torch.jit.trace and
torch.compile cannot take that branch and build and apply the full mask instead. The
harness checks once, outside any trace, that the mask is all ones and then lets every
recipe take eager's branch (`same_attention_work`), so that a speed-up of a compiler is
not a speed-up over different work. transformers' eager attention (measurement.attention:
eager) applies the mask in every recipe, as its TensorFlow classes do.
"""

# The backend first: it sets the environment that transformers and the framework read
# when they load.
from dlbench.frameworks.pytorch.backend import InductorCaches, PyTorchBackend  # isort: split

import contextlib
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
import transformers

from dlbench.catalogue.models import ModelSpec
from dlbench.catalogue.recipes import Optimization
from dlbench.frameworks.pytorch import dynamo
from dlbench.frameworks.pytorch.about import FRAMEWORK

_AUTOCAST = {"bf16": torch.bfloat16, "fp16": torch.float16}
# Ops that move, view or create tensors without computing on them: left out of the record
# of which ops computed in which type under autocast.
_MOVEMENT = frozenset({
    "view", "_unsafe_view", "reshape", "t", "transpose", "permute", "expand", "slice",
    "select", "unsqueeze", "squeeze", "clone", "contiguous", "_to_copy", "to", "detach",
    "split", "split_with_sizes", "unbind", "as_strided", "alias", "copy_", "empty",
    "empty_like", "zeros", "zeros_like", "ones", "ones_like", "full", "arange", "new_ones",
    "new_zeros", "new_empty", "lift_fresh", "_reshape_alias", "flatten", "cat", "stack",
})


class PyTorchInference:
    recipes: dict[str, Callable]  # by name, bound to this instance (set in __init__)

    def __init__(self, backend: PyTorchBackend):
        self.backend = backend
        self.device = backend.device
        self.caches = InductorCaches()
        self._undo: list = []  # what release() puts back: patches, Inductor options
        self._mask_skipped = False
        self._compiled = False
        self.recipes = {
            "eager": self._eager,
            "torchscript": self._torchscript,
            "onednn": self._onednn,
            "compile": self._compile,
            "compile-max-autotune": self._compile,
            "compile-reduce-overhead": self._compile,
            # The same steps with SDPA: the model was built with it (recipe.attention).
            "eager-sdpa": self._eager,
            "torchscript-sdpa": self._torchscript,
            "compile-sdpa": self._compile,
        }

    # -- model and inputs ----------------------------------------------------------------

    def build(self, spec: ModelSpec, seed: int, optimization: Optimization,
              weights: Path | None = None, attention: str = "sdpa") -> torch.nn.Module:
        """The model on the device, ready for inference: the weights from a safetensors file
        written by `dlbench.reference` if given, else random from the seed; `attention` is
        transformers' attention implementation (sdpa where the model has one, or eager)."""
        config = getattr(transformers, spec.classes.config_class)(**spec.params)
        model_class = getattr(transformers, FRAMEWORK.model_class(spec.family))
        if attention == "eager" or getattr(model_class, "_supports_sdpa", False):
            config._attn_implementation = attention
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
            _read_every_weight(model)
        return model.eval().to(self.device)

    def save_weights(self, model: torch.nn.Module, path: Path) -> None:
        """Write the model's weights as `path` (model.safetensors), readable without torch."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=path.parent, prefix=".weights-") as tmp:
            model.save_pretrained(tmp, safe_serialization=True, max_shard_size="1000GB")
            os.replace(Path(tmp) / "config.json", path.with_name("config.json"))
            weights = Path(tmp) / "model.safetensors"
            from dlbench.files.atomic import default_file_mode

            os.chmod(weights, default_file_mode())  # safetensors makes it private (0600)
            os.replace(weights, path)

    def inputs(self, token_ids: np.ndarray) -> dict:
        ids = torch.from_numpy(token_ids).to(self.device)
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}

    def to_numpy(self, output: torch.Tensor) -> np.ndarray:
        return output.detach().float().cpu().numpy()

    def versions(self) -> dict[str, str]:
        return {"transformers": transformers.__version__}

    # -- what the cell records besides its timing ----------------------------------------

    def attention(self, model: torch.nn.Module) -> dict:
        """The attention implementation and whether the attention mask is applied (the
        same in every recipe: see the module's note)."""
        implementation = model.config._attn_implementation
        return {"implementation": implementation, "mask_applied": not self._mask_skipped,
                "implementation_of": "transformers (PyTorch classes)"}

    def compilation(self) -> dict | None:
        """torch.compile's graphs, graph breaks and recompilations since the compile
        recipe started (None for other recipes): one graph, no break and no recompilation
        is what a compiled model should be."""
        return dynamo.compilation() if self._compiled else None

    def precision_ops(self, model: torch.nn.Module, inputs: dict,
                      optimization: Optimization) -> dict:
        """Which ops computed in float32 and which in the reduced type, in one eager call
        under the cell's precision (autocast's op lists decide; the recipe does not
        change them)."""
        from torch.utils._python_dispatch import TorchDispatchMode
        from torch.utils._pytree import tree_leaves

        reduced = _AUTOCAST[optimization.precision.name]
        seen: dict[torch.dtype, set[str]] = {torch.float32: set(), reduced: set()}

        class Dtypes(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                out = func(*args, **(kwargs or {}))
                name = func.overloadpacket.__name__
                if name not in _MOVEMENT:
                    for leaf in tree_leaves(out):
                        if isinstance(leaf, torch.Tensor) and leaf.dtype in seen:
                            seen[leaf.dtype].add(f"aten.{name}")
                return out

        with self._context(optimization)(), Dtypes():
            model(**inputs)
        return {"float32_ops": sorted(seen[torch.float32]),
                "reduced_ops": sorted(seen[reduced]),
                "method": "aten ops by the floating-point type of their outputs, one eager "
                          "call under torch.autocast (views and copies left out)"}

    # -- the same attention work in every recipe -----------------------------------------

    def same_attention_work(self, model: torch.nn.Module, inputs: dict) -> None:
        """Make every recipe skip an all-ones attention mask, as transformers' SDPA path
        does eagerly: decided here, once, on the real mask; kept until release()."""
        mask = inputs.get("attention_mask")
        if model.config._attn_implementation != "sdpa" or mask is None \
                or not bool(torch.all(mask == 1)):
            return
        from transformers import masking_utils

        module = sys.modules[type(model).__module__]
        if hasattr(module, "_prepare_4d_attention_mask_for_sdpa"):  # BERT-like models
            self._patch(module, "_prepare_4d_attention_mask_for_sdpa", _no_padding_mask)
        self._patch(masking_utils, "_ignore_causal_mask_sdpa", _causal_mask_as_is_causal)
        self._mask_skipped = True

    def _patch(self, owner, name: str, value) -> None:
        original = getattr(owner, name)
        setattr(owner, name, value)
        self._undo.append(lambda: setattr(owner, name, original))

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

    def _onednn(self, model, inputs: dict, optimization: Optimization):
        if not _products_through_onednn(model):
            raise ValueError(f"{type(model).__name__} has no nn.Linear or Conv1D layer for "
                             "oneDNN to run")
        return self._eager(model, inputs, optimization)

    def _compile(self, model, inputs: dict, optimization: Optimization):
        self.caches.fresh()
        options = dict(optimization.recipe.inductor_cpu) if self.device.type == "cpu" else {}
        if options:  # Inductor compiles at the first call: its options stay set till then
            patch = torch._inductor.config.patch(options)
            patch.__enter__()
            self._undo.append(lambda: patch.__exit__(None, None, None))
        dynamo.start()  # this cell's graphs, breaks and recompilations only
        self._compiled = True
        compiled = torch.compile(model, mode=optimization.recipe.compile_mode)
        return self._step(lambda: compiled(**inputs).last_hidden_state,
                          self._context(optimization))

    # -- the end of a cell ---------------------------------------------------------------

    def release(self) -> None:
        """Leave the process as the cell found it: the next cell of a group compiles
        afresh (no cached graphs, no switch to dynamic shapes because an earlier cell
        compiled another shape), with the environment it started with."""
        self.caches.release()
        while self._undo:
            self._undo.pop()()
        self._mask_skipped = self._compiled = False


def _products_through_onednn(model: torch.nn.Module) -> int:
    """Replace every nn.Linear, and transformers' Conv1D (GPT-2's linear layers, their
    weight transposed), with torch.utils.mkldnn's MkldnnLinear, whose product is oneDNN's;
    how many layers now run through oneDNN (a group's model is converted by its first
    cell)."""
    from torch.utils.mkldnn import MkldnnLinear
    from transformers.pytorch_utils import Conv1D

    def as_linear(layer: Conv1D) -> torch.nn.Linear:
        linear = torch.nn.Linear(*layer.weight.shape)
        linear.weight, linear.bias = (torch.nn.Parameter(layer.weight.detach().t()),
                                      layer.bias)
        return linear

    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, torch.nn.Linear):
                setattr(parent, name, MkldnnLinear(child, torch.float32))
            elif isinstance(child, Conv1D):
                setattr(parent, name, MkldnnLinear(as_linear(child), torch.float32))
    return sum(isinstance(layer, MkldnnLinear) for layer in model.modules())


class _LastHiddenState(torch.nn.Module):
    """The model as a function of the token ids with one tensor as its output: what the
    trace records, without model-output objects or caches, which a trace cannot return."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=input_ids).last_hidden_state


def _no_padding_mask(mask: torch.Tensor, dtype: torch.dtype, tgt_len: int | None = None):
    """transformers' `_prepare_4d_attention_mask_for_sdpa` for a mask the harness found to
    be all ones: no mask, as it returns itself outside a trace."""
    return None


def _causal_mask_as_is_causal(padding_mask, query_length: int, kv_length: int, kv_offset: int,
                              local_attention_size: int | None = None) -> bool:
    """transformers' `masking_utils._ignore_causal_mask_sdpa` for a padding mask the harness
    found to be all ones: its decision outside a trace (SDPA's is_causal instead of a
    mask, where the query and key lengths allow it)."""
    return ((query_length == 1 or kv_length == query_length)
            and (local_attention_size is None or kv_length < local_attention_size))


def _check_loading(info: dict, weights: Path) -> None:
    problems = {k: v for k, v in info.items() if k != "error_msgs" and v}
    if problems or info.get("error_msgs"):
        raise ValueError(f"{weights} does not fit the model: {info}")


def make_ops(backend: PyTorchBackend) -> PyTorchInference:
    return PyTorchInference(backend)


def _read_every_weight(model: torch.nn.Module) -> None:
    """from_pretrained maps the safetensors file into memory: its weights become resident
    only as the first call reads them, so the memory phases counted them as the first
    call's and the input's (BERT base: the resident model 339 MiB, 58 over the process
    before it, for 418 MiB of weights). Reading each once makes the resident model the
    model, as the other frameworks' copies are."""
    with torch.no_grad():
        for tensor in model.state_dict().values():
            tensor.sum()
