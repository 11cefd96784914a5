"""ONNX Runtime backend: what every scenario needs (device, threads, synchronization, memory
peaks, out-of-memory detection, versions). Its thread pools belong to each
`InferenceSession`, so the backend holds the settings that every session of a cell is
made with (`session_options`).

`InferenceSession.run` returns when its outputs are computed: there is nothing queued to
wait for."""

import os

import onnxruntime as ort

from dlbench.frameworks import cpu_precision_problem

_LEVELS = {"disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
           "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
           "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
           "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL}
PROVIDER = "CPUExecutionProvider"


class OnnxRuntimeBackend:
    name = "onnxruntime"

    def __init__(self, device: str, threads: int, interop_threads: int):
        self.on_gpu = device == "gpu"
        self.threads = threads
        ort.set_default_logger_severity(3)  # errors only, in the cell's log

    def session_options(self, level: str = "all") -> "ort.SessionOptions":
        """A session's options: the cell's threads, graph optimizations at `level`
        (disable, basic, extended, all), sequential execution (ONNX Runtime's default: the
        nodes one after another, each on the intra-op pool; no inter-op pool exists)."""
        options = ort.SessionOptions()
        options.intra_op_num_threads = self.threads
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = _LEVELS[level]
        return options

    def device_problem(self) -> str | None:
        if self.on_gpu:
            return (f"onnxruntime {ort.__version__} here has no GPU execution provider "
                    f"(it has {', '.join(ort.get_available_providers())}; the CUDA one is "
                    "the onnxruntime-gpu package)")
        return None

    def precision_problem(self, precision: str) -> str | None:
        if precision == "fp32":
            return None
        problem = cpu_precision_problem(precision)
        if problem:
            return problem
        # Where the CPU has the units, where the CPU execution provider loads a MatMul in it.
        # Measured (2026-11-29, onnxruntime 1.32.0, 2-core Xeon with AVX512-FP16 and AMX):
        # a bfloat16 MatMul fails to load (NOT_IMPLEMENTED); a float16 one runs, and the
        # converted tiny-bert's output was 5.7e-4 from float32's (relative).
        kernel = _matmul_problem(precision)
        if kernel is None:
            return None
        kind = {"bf16": "bfloat16", "fp16": "float16"}[precision]
        return (f"ONNX Runtime {ort.__version__}'s CPU execution provider cannot load a "
                f"{kind} MatMul ({kernel})")

    def set_arithmetic(self, precision: str) -> dict:
        # The CPU execution provider computes float32 in float32: nothing to switch.
        return {"tf32": False, "switches": {}}

    def thread_settings(self) -> dict[str, int]:
        # As set (ONNX Runtime reads none back): its intra-op pool counts the calling
        # thread, as PyTorch's does; sequential execution has no inter-op pool, whatever
        # measurement.interop_threads asks.
        return {"intra_op": self.threads, "inter_op": 1}

    def synchronize(self) -> None:
        """Nothing queued: run() returns computed outputs."""

    def device_timer(self) -> None:
        return None

    def reset_device_memory(self) -> None:
        """No device memory (CPU only)."""

    def device_memory(self) -> None:
        return None

    def memory_counters(self) -> None:
        return None

    def is_out_of_memory(self, exc: BaseException) -> bool:
        if isinstance(exc, MemoryError):
            return True
        # The CPU allocator's failure, raised as a runtime exception.
        return "Failed to allocate memory" in str(exc) or "bad_alloc" in str(exc)

    def versions(self) -> dict[str, str | None]:
        return {"onnxruntime": ort.__version__, "onnxruntime_providers":
                ",".join(ort.get_available_providers()),
                "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS")}


def _matmul_problem(precision: str) -> str | None:
    """Why the CPU execution provider cannot load a MatMul in `precision` (None: it can)."""
    from onnx import TensorProto

    from dlbench.frameworks.onnxruntime.gemm import matmul_graph

    kind = {"bf16": TensorProto.BFLOAT16, "fp16": TensorProto.FLOAT16}[precision]
    try:
        ort.InferenceSession(matmul_graph(kind, 2), providers=[PROVIDER])
    except Exception as exc:  # onnxruntime's own exception types are not exported
        return str(exc).split(" : ")[-1].strip()
    return None


def make_backend(device: str, threads: int, interop_threads: int) -> OnnxRuntimeBackend:
    return OnnxRuntimeBackend(device, threads, interop_threads)
