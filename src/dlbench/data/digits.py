"""scikit-learn's bundled handwritten digits (1,797 real 8×8 grey images, 10 classes),
upscaled to 32×32 RGB: real images that nobody here made, in the CNN's input shape."""

import numpy as np

from dlbench.data import Split

CLASSES = [str(d) for d in range(10)]
IMAGES = 1797  # in scikit-learn's bundled set
TEST_FRACTION = 0.2
TRAIN_IMAGES = IMAGES - round(IMAGES * TEST_FRACTION)  # 1,438: known before building


def load(test_fraction: float, seed: int) -> tuple[Split, Split]:
    from sklearn.datasets import load_digits

    digits = load_digits()
    grey = digits.images / 16.0  # 0..16 → 0..1
    images = (np.kron(grey, np.ones((4, 4)))[..., None].repeat(3, axis=-1) * 255).round()
    images = images.astype(np.uint8)
    order = np.random.default_rng(seed).permutation(len(images))
    test = order[:round(len(images) * test_fraction)]
    train = order[len(test):]
    return (Split(images[train], digits.target[train]),
            Split(images[test], digits.target[test]))
