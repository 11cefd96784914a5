"""Vision models for the training scenario: the CNN of the DeepLearningFrameworks
comparison, defined once here, built layer for layer alike by each framework.

conv 3×3 (3→50, same) → ReLU → conv 3×3 (50→50, same) → max-pool 2 → ReLU → dropout 0.25 →
conv 3×3 (50→100) → ReLU → conv 3×3 (100→100) → max-pool 2 → ReLU → dropout 0.25 → flatten →
dense 512 → ReLU → dropout 0.5 → dense 10 (logits; softmax inside the loss).

Both frameworks start from the same weights: Glorot-uniform kernels and zero biases drawn
here with numpy from one seed, in one canonical layout (PyTorch's: convolutions OIHW,
dense layers (out, in), the first dense layer's inputs in C, H, W order, as PyTorch
flattens NCHW). A framework that lays them out differently converts them when it loads
them (TensorFlow: HWIO kernels, (in, out) dense layers, H, W, C flattening — in both data
formats, since Keras's Flatten moves channels-first features to channels-last first).
"""

from dataclasses import dataclass
from types import MappingProxyType

import numpy as np


@dataclass(frozen=True)
class CNN:
    name: str
    description: str
    image_size: int = 32
    # Input channels, then the four convolutions' output channels.
    channels: tuple[int, ...] = (3, 50, 50, 100, 100)
    hidden: int = 512
    classes: int = 10
    kernel: int = 3
    dropout: tuple[float, float, float] = (0.25, 0.25, 0.5)

    @property
    def flat(self) -> int:
        """Inputs of the first dense layer: the last channels × the twice-pooled image."""
        side = self.image_size // 4
        return self.channels[-1] * side * side

    def shapes(self) -> dict[str, tuple[int, ...]]:
        """Every parameter's shape in the canonical (PyTorch) layout, in layer order."""
        k, shapes = self.kernel, {}
        for i in range(4):
            shapes[f"conv{i + 1}.weight"] = (self.channels[i + 1], self.channels[i], k, k)
            shapes[f"conv{i + 1}.bias"] = (self.channels[i + 1],)
        shapes["fc1.weight"], shapes["fc1.bias"] = (self.hidden, self.flat), (self.hidden,)
        shapes["fc2.weight"], shapes["fc2.bias"] = (self.classes, self.hidden), (self.classes,)
        return shapes

    def parameters(self) -> int:
        return sum(int(np.prod(shape)) for shape in self.shapes().values())


def initial_weights(model: CNN, seed: int) -> dict[str, np.ndarray]:
    """Glorot-uniform kernels (Keras's fan-in and fan-out: receptive field × channels) and
    zero biases, float32, canonical layout; the same arrays for every framework."""
    rng = np.random.default_rng(seed)
    weights = {}
    for name, shape in model.shapes().items():
        if name.endswith(".bias"):
            weights[name] = np.zeros(shape, np.float32)
            continue
        receptive = int(np.prod(shape[2:])) if len(shape) == 4 else 1
        fan_out, fan_in = shape[0] * receptive, shape[1] * receptive
        limit = np.sqrt(6.0 / (fan_in + fan_out))
        weights[name] = rng.uniform(-limit, limit, size=shape).astype(np.float32)
    return weights


MODELS = MappingProxyType({
    m.name: m for m in (
        CNN("cnn", "the DeepLearningFrameworks CNN: 4 convolutions, 2 dense layers, "
            "3.4M parameters (32×32 RGB, 10 classes)"),
        # Its layers, a tenth of its work: for checks of the pipeline and the verdicts.
        CNN("tiny-cnn", "the same layers, narrower: 16 and 32 channels, dense 128 "
            "(32×32 RGB, 10 classes)", channels=(3, 16, 16, 32, 32), hidden=128),
    )
})


def get_cnn(name: str) -> CNN:
    try:
        return MODELS[name]
    except KeyError:
        raise KeyError(f"unknown vision model {name!r}; known: {', '.join(MODELS)}") from None
