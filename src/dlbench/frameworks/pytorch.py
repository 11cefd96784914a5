"""PyTorch backend: transformers' PyTorch classes; eager, TorchScript (trace),
torch.compile in any mode, each in fp32 or under bf16/fp16 autocast."""

import contextlib
import os
import shutil
import tempfile
from pathlib import Path

# transformers 4.x imports TensorFlow too when it finds it: seconds and ~500 MB per cell.
os.environ.setdefault("USE_TF", "0")
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # weights come from a local file or the seed

import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402

from dlbench.frameworks import Step, cpu_precision_problem, gpu_precision_problem  # noqa: E402
from dlbench.models import ModelSpec  # noqa: E402
from dlbench.optimizations import Optimization  # noqa: E402

_AUTOCAST = {"bf16": torch.bfloat16, "fp16": torch.float16}


class PyTorchBackend:
    name = "pytorch"

    def __init__(self, device: str, threads: int, interop_threads: int):
        torch.set_num_threads(threads)
        torch.set_num_interop_threads(interop_threads)
        self.device = torch.device("cuda" if device == "gpu" else "cpu")
        self._temporary: list[str] = []
        self.recipes = {
            "eager": self._eager,
            "torchscript": self._torchscript,
            "compile": self._compile,
            "compile-max-autotune": self._compile,
            "compile-reduce-overhead": self._compile,
        }

    # -- the device --------------------------------------------------------------------

    def device_problem(self) -> str | None:
        if self.device.type == "cuda" and not torch.cuda.is_available():
            return "PyTorch sees no CUDA device"
        return None

    def optimization_problem(self, optimization: Optimization) -> str | None:
        precision = optimization.precision.name
        if precision == "fp32":
            return None
        if self.device.type == "cpu":
            return cpu_precision_problem(precision)
        return gpu_precision_problem(precision, torch.cuda.get_device_name(self.device),
                                     torch.cuda.get_device_capability(self.device))

    def thread_settings(self) -> dict[str, int]:
        return {"intra_op": torch.get_num_threads(), "inter_op": torch.get_num_interop_threads()}

    # -- model and inputs ----------------------------------------------------------------

    def build(self, spec: ModelSpec, seed: int, optimization: Optimization,
              weights: Path | None = None) -> torch.nn.Module:
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
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(weights, 0o666 & ~umask)  # as open() would (safetensors makes it 0600)
            os.replace(weights, path)

    def inputs(self, token_ids: np.ndarray) -> dict:
        ids = torch.from_numpy(token_ids).to(self.device)
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}

    def synchronize(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def device_timer(self) -> "_CudaEvents | None":
        return _CudaEvents() if self.device.type == "cuda" else None

    def reset_device_memory(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.empty_cache()  # what an earlier cell of the process left cached
            torch.cuda.reset_peak_memory_stats(self.device)

    def device_memory(self) -> dict[str, float] | None:
        if self.device.type != "cuda":
            return None
        return {
            "device_allocated_peak_mb": torch.cuda.max_memory_allocated(self.device) / 2**20,
            "device_reserved_peak_mb": torch.cuda.max_memory_reserved(self.device) / 2**20,
            "device_method": "torch.cuda.max_memory_allocated / max_memory_reserved",
        }

    def to_numpy(self, output: torch.Tensor) -> np.ndarray:
        return output.detach().float().cpu().numpy()

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
    def _step(forward, context) -> Step:
        def step():
            with context():
                return forward()

        return step

    def _eager(self, model, inputs: dict, optimization: Optimization) -> Step:
        return self._step(lambda: model(**inputs).last_hidden_state, self._context(optimization))

    def _torchscript(self, model, inputs: dict, optimization: Optimization) -> Step:
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

    def _compile(self, model, inputs: dict, optimization: Optimization) -> Step:
        # A fresh Inductor cache per cell: the first call pays a cold compilation, the
        # same in every run, instead of whatever an earlier cell left behind.
        cache_dir = tempfile.mkdtemp(prefix="dlbench-inductor-")
        self._temporary.append(cache_dir)
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache_dir
        os.environ["TRITON_CACHE_DIR"] = os.path.join(cache_dir, "triton")
        compiled = torch.compile(model, mode=optimization.recipe.compile_mode)
        return self._step(lambda: compiled(**inputs).last_hidden_state,
                          self._context(optimization))

    # -- the rest ------------------------------------------------------------------------

    def release(self) -> None:
        # The next cell of a group compiles afresh: no cached graphs, and no switch to
        # dynamic shapes because an earlier cell compiled another shape.
        torch.compiler.reset()
        for path in self._temporary:
            shutil.rmtree(path, ignore_errors=True)
        self._temporary.clear()

    def is_out_of_memory(self, exc: BaseException) -> bool:
        if isinstance(exc, MemoryError | torch.cuda.OutOfMemoryError):
            return True
        # The CPU allocator's failure is a plain RuntimeError.
        return isinstance(exc, RuntimeError) and "can't allocate memory" in str(exc)

    def versions(self) -> dict[str, str]:
        return {"torch": torch.__version__, "transformers": transformers.__version__}


class _CudaEvents:
    """CUDA events recorded on the current stream, where the steps run."""

    method = "CUDA events (torch.cuda.Event) on the current stream"

    def __init__(self):
        self._start = torch.cuda.Event(enable_timing=True)
        self._end = torch.cuda.Event(enable_timing=True)

    def start(self) -> None:
        self._start.record()

    def stop(self) -> None:
        self._end.record()

    def elapsed_ms(self) -> float:
        return self._start.elapsed_time(self._end)


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


def make_backend(device: str, threads: int, interop_threads: int) -> PyTorchBackend:
    return PyTorchBackend(device, threads, interop_threads)
