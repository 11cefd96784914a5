"""PyTorch text generation: transformers' causal-LM classes and `generate()`, greedy, a
fixed number of new tokens; eager (the dynamic key-value cache), static-cache (a
preallocated cache, not compiled) and compile (the static cache and torch.compile of the
model's forward, the decoding step, as transformers' docs recommend), each in fp32 or with
the model in bfloat16. Every decoding step is timestamped by a logits processor (after the
device's synchronization): generate's loop runs in Python in every recipe."""

# The backend first: it sets the environment that transformers and the framework read
# when they load.
from dlbench.frameworks.pytorch.backend import InductorCaches, PyTorchBackend  # isort: split

import time
from pathlib import Path

import numpy as np
import torch
import transformers

from dlbench.catalogue.models import ModelSpec
from dlbench.catalogue.recipes import Optimization
from dlbench.frameworks.pytorch import dynamo
from dlbench.frameworks.pytorch.inference import _check_loading, _read_every_weight
from dlbench.measure import faults
from dlbench.measure.decoder import Decoder

# The causal-LM class of each decoder family (its head tied to the word embeddings).
LM_CLASSES = {"gpt2": "GPT2LMHeadModel"}
_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


class _Stamps(transformers.LogitsProcessor):
    """Notes the time at which each step's logits are ready (after synchronizing)."""

    def __init__(self, synchronize):
        self.synchronize = synchronize
        self.times: list[float] = []

    def __call__(self, input_ids, scores):
        self.synchronize()
        self.times.append(time.perf_counter())
        return scores


class PyTorchGeneration:
    def __init__(self, backend: PyTorchBackend):
        self.backend = backend
        self.device = backend.device
        self.caches = InductorCaches()
        self._compiled = False
        self._counts: list[dict] = []  # the compiler's counts after the first calls

    def build(self, spec: ModelSpec, seed: int, optimization: Optimization,
              weights: Path | None = None, attention: str = "sdpa") -> torch.nn.Module:
        """The causal LM on the device in the cell's dtype: the base model's shared
        weights (the head is tied to the word embeddings), else random from the seed;
        `attention`: transformers' implementation (sdpa where the model has one, or eager)."""
        config = getattr(transformers, spec.classes.config_class)(**spec.params)
        model_class = getattr(transformers, LM_CLASSES[spec.family])
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
                use_safetensors=True, output_loading_info=True)
            # The base model's file has no head: it is tied, not missing.
            info["missing_keys"] = [k for k in info["missing_keys"] if k != "lm_head.weight"]
            _check_loading(info, weights)
            _read_every_weight(model)
        dtype = _DTYPES[optimization.precision.name]
        return model.eval().to(self.device, dtype=dtype)

    def inputs(self, token_ids: np.ndarray) -> dict:
        ids = torch.from_numpy(token_ids).to(self.device)
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}

    def decoder(self, model: torch.nn.Module, inputs: dict, new_tokens: int,
                optimization: Optimization) -> Decoder:
        # The -sdpa recipes decode as their namesakes: the model was built with SDPA.
        recipe = optimization.recipe.name.removesuffix("-sdpa")
        stamps = _Stamps(self.backend.synchronize)
        options = dict(do_sample=False, num_beams=1, max_new_tokens=new_tokens,
                       min_new_tokens=new_tokens, eos_token_id=None,
                       pad_token_id=model.config.eos_token_id,
                       # static-cache stays uncompiled (generate compiles it on a GPU)
                       disable_compile=True,
                       logits_processor=transformers.LogitsProcessorList([stamps]))
        how = "generate(), greedy, the dynamic key-value cache, op by op"
        if recipe in ("static-cache", "compile"):
            options["cache_implementation"] = "static"
            how = "generate(), greedy, a static key-value cache, op by op"
        if recipe == "compile":
            self.caches.fresh()
            dynamo.start()
            self._compiled = True
            model.forward = torch.compile(model.forward,
                                          mode=optimization.recipe.compile_mode)
            how = ("generate(), greedy, a static key-value cache, the model's forward "
                   "(prompt and each decoding step) compiled by torch.compile")

        if faults.generation_fault() == "wrong-cache":
            self._corrupt_cache_midway(model, int(inputs["input_ids"].shape[1]), new_tokens)

        def generate(prompt: dict):
            stamps.times = []
            with torch.inference_mode():
                return model.generate(**prompt, **options)

        def call():
            output = generate(inputs)
            if self._compiled and len(self._counts) < 2:
                self._counts.append(dynamo.compilation())
            return output

        static = "cache_implementation" in options

        def first():
            """generate()'s first step as a call of its own: the prompt's forward pass with
            the cache generate gives it (a fresh dynamic cache, or its static cache, sized
            for the whole generation, reset), through the same (compiled) forward, and the
            greedy choice."""
            ids = inputs["input_ids"]
            with torch.inference_mode():
                if static and getattr(model, "_cache", None) is None:
                    generate(inputs)  # generate makes its static cache
                if static:
                    cache = model._cache
                    cache.reset()
                else:
                    cache = transformers.DynamicCache(
                        config=model.config.get_text_config(decoder=True))
                # generate asks for the last position's logits only, where the model can
                # (bench/first_token.py: distilgpt2's step took 43 ms with all 32, against
                # 33 ms for a one-token generate())
                keep = {"logits_to_keep": 1} if model._supports_logits_to_keep() else {}
                step = model.prepare_inputs_for_generation(
                    ids, past_key_values=cache, attention_mask=inputs["attention_mask"],
                    cache_position=torch.arange(ids.shape[1], device=ids.device),
                    use_cache=True, **keep)
                return model(**step, return_dict=True).logits[:, -1].argmax(-1)

        if recipe != "compile":
            return Decoder(call=call, how=how, stamps=lambda: list(stamps.times),
                           first=first)
        return Decoder(call=call, how=how, stamps=lambda: list(stamps.times), first=first,
                       call_with=generate,
                       compilations=lambda: dynamo.compilation()["graphs"],
                       counted="graphs compiled by torch.compile (dynamo's unique_graphs)")

    @staticmethod
    def _corrupt_cache_midway(model: torch.nn.Module, prompt_length: int,
                              new_tokens: int) -> None:
        """The wrong-cache fault (dlbench.measure.faults): after the forward pass that made
        new token new_tokens // 2 − 1, the cache's values are corrupted, so that token
        new_tokens // 2 is the first made from a wrong cache."""
        forward, middle = model.forward, new_tokens // 2

        def faulty(*args, **kwargs):
            output = forward(*args, **kwargs)
            # generate's positions of the tokens this pass fed: the pass that made token
            # `middle` − 1 ends at position prompt + middle − 2
            position = kwargs.get("cache_position")
            if (position is not None and output.past_key_values is not None
                    and int(position[-1]) == prompt_length + middle - 2):
                faults.corrupt_cache(output.past_key_values)
            return output

        model.forward = faulty

    def new_ids(self, output: torch.Tensor, prompt_length: int) -> np.ndarray:
        return output[:, prompt_length:].cpu().numpy()

    def attention(self, model: torch.nn.Module) -> dict:
        return {"implementation": model.config._attn_implementation,
                "implementation_of": "transformers (PyTorch classes)"}

    def compilation(self) -> dict | None:
        """torch.compile's graphs, breaks and recompilations of the cell, and the
        recompilations after the first and after the second generation (the prompt's and
        the decoding step's shapes differ, so the first generation compiles at least
        twice; the scenario warms up with two generations, so that none lands in the
        timed loop)."""
        if not self._compiled:
            return None
        final = dynamo.compilation()
        counts = self._counts + [final] * (2 - len(self._counts))
        return {**final,
                "recompiles_after_first_call": final["recompiles"] - counts[0]["recompiles"],
                "recompiles_after_second_call": final["recompiles"] - counts[1]["recompiles"]}

    def versions(self) -> dict[str, str]:
        return {"transformers": transformers.__version__}

    def release(self) -> None:
        self.caches.release()
        self._compiled, self._counts = False, []


def make_ops(backend: PyTorchBackend) -> PyTorchGeneration:
    return PyTorchGeneration(backend)
