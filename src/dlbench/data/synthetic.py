"""A synthetic CIFAR-shaped data set: 32×32 RGB images in 10 classes, each class a shape
(disk, square, ring, plus, diamond) in a colour family (warm or cool), drawn at a random
place, size and shade on a textured background, with a fainter distractor shape of another
class and pixel noise. The classes are told apart by structure and colour, both unchanged
by horizontal flips and small shifts (the training augmentation); the distractors, shade
jitter and noise keep a CNN well below 100% after a few epochs."""

import numpy as np

from dlbench.data import Split

SHAPES = ("disk", "square", "ring", "plus", "diamond")
FAMILIES = ("warm", "cool")
CLASSES = [f"{family}-{shape}" for family in FAMILIES for shape in SHAPES]
SIZE = 32


def _mask(shape: str, size: int, cy: float, cx: float, radius: float) -> np.ndarray:
    y, x = np.mgrid[0:size, 0:size].astype(np.float32)
    dy, dx = y - cy, x - cx
    if shape == "disk":
        return dy**2 + dx**2 <= radius**2
    if shape == "square":
        return (np.abs(dy) <= radius * 0.85) & (np.abs(dx) <= radius * 0.85)
    if shape == "ring":
        r2 = dy**2 + dx**2
        return (r2 <= radius**2) & (r2 >= (radius * 0.55) ** 2)
    if shape == "plus":
        arm = max(radius * 0.3, 1.0)
        return ((np.abs(dy) <= arm) & (np.abs(dx) <= radius)) | (
            (np.abs(dx) <= arm) & (np.abs(dy) <= radius))
    return np.abs(dy) + np.abs(dx) <= radius * 1.1  # diamond


def _colour(rng: np.random.Generator, family: str) -> np.ndarray:
    """An RGB colour of the family: warm (reds to yellows) or cool (greens to blues)."""
    hue = rng.uniform(0.0, 0.16) if family == "warm" else rng.uniform(0.36, 0.66)
    saturation, value = rng.uniform(0.45, 1.0), rng.uniform(0.5, 1.0)
    i = int(hue * 6) % 6
    f = hue * 6 - int(hue * 6)
    p, q, t = value * (1 - saturation), value * (1 - f * saturation), value * (
        1 - (1 - f) * saturation)
    rgb = [(value, t, p), (q, value, p), (p, value, t), (p, q, value), (t, p, value),
           (value, p, q)][i]
    return np.array(rgb, np.float32)


def image(rng: np.random.Generator, label: int, noise: float = 0.04) -> np.ndarray:
    """One image of class `label`, uint8, 32×32×3."""
    family, shape = divmod(label, len(SHAPES))
    canvas = np.empty((SIZE, SIZE, 3), np.float32)
    canvas[:] = rng.uniform(0.2, 0.6, size=3)  # background shade
    canvas += rng.normal(0, 0.03, size=(SIZE // 4, SIZE // 4, 3)).repeat(4, 0).repeat(4, 1)
    other = int(rng.integers(len(CLASSES) - 1))
    other += other >= label
    for cls, strength, scale in ((other, rng.uniform(0.1, 0.25), (3.0, 5.0)),
                                 (label, 1.0, (8.0, 13.0))):
        f, s = divmod(cls, len(SHAPES))
        radius = rng.uniform(*scale)
        cy, cx = rng.uniform(radius, SIZE - 1 - radius, size=2)
        mask = _mask(SHAPES[s], SIZE, cy, cx, radius)
        colour = _colour(rng, FAMILIES[f])
        canvas[mask] = (1 - strength) * canvas[mask] + strength * colour
    canvas += rng.normal(0, noise, size=canvas.shape)
    return (np.clip(canvas, 0, 1) * 255).round().astype(np.uint8)


def generate(count: int, seed: int) -> Split:
    """`count` images, classes balanced (in turn), from one seed."""
    rng = np.random.default_rng(seed)
    labels = np.arange(count) % len(CLASSES)
    rng.shuffle(labels)
    return Split(np.stack([image(rng, int(label)) for label in labels]), labels)
