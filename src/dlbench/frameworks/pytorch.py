"""PyTorch backend: transformers' PyTorch classes, eager by default."""

import os

# transformers 4.x imports TensorFlow too when it finds it: seconds and ~500 MB per cell.
os.environ.setdefault("USE_TF", "0")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402

from dlbench.frameworks import Step  # noqa: E402
from dlbench.models import ModelSpec  # noqa: E402


def _eager(model: torch.nn.Module, inputs: dict) -> Step:
    def step():
        with torch.inference_mode():
            return model(**inputs).last_hidden_state

    return step


class PyTorchBackend:
    name = "pytorch"
    recipes = {"eager": _eager}

    def __init__(self, device: str, threads: int, interop_threads: int):
        torch.set_num_threads(threads)
        torch.set_num_interop_threads(interop_threads)
        self.device = torch.device("cuda" if device == "gpu" else "cpu")

    def device_problem(self) -> str | None:
        if self.device.type == "cuda" and not torch.cuda.is_available():
            return "PyTorch sees no CUDA device"
        return None

    def thread_settings(self) -> dict[str, int]:
        return {"intra_op": torch.get_num_threads(), "inter_op": torch.get_num_interop_threads()}

    def build(self, spec: ModelSpec, seed: int) -> torch.nn.Module:
        torch.manual_seed(seed)
        config = getattr(transformers, spec.classes.config_class)(**spec.params)
        model = getattr(transformers, spec.classes.pytorch_class)(config)
        return model.eval().to(self.device)

    def inputs(self, token_ids: np.ndarray) -> dict:
        ids = torch.from_numpy(token_ids).to(self.device)
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}

    def synchronize(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def is_out_of_memory(self, exc: BaseException) -> bool:
        return isinstance(exc, MemoryError | torch.cuda.OutOfMemoryError)

    def versions(self) -> dict[str, str]:
        return {"torch": torch.__version__, "transformers": transformers.__version__}


def make_backend(device: str, threads: int, interop_threads: int) -> PyTorchBackend:
    return PyTorchBackend(device, threads, interop_threads)
