"""The fixed values of the matrix axes that are not registries of their own."""

FRAMEWORKS = ("pytorch", "tensorflow", "jax")
DEVICES = ("cpu", "gpu")
FRAMEWORK_LABELS = {"pytorch": "PyTorch", "tensorflow": "TensorFlow", "jax": "JAX"}

# How a cell whose optimization belongs to the other framework is unsupported: the
# analysis counts such cells once as not applicable by this phrase (dlbench.analysis.status).
OTHER_FRAMEWORK = "does not exist in"


def other_framework_reason(optimization: str, framework: str, frameworks, what: str = ""
                           ) -> str:
    """Why `optimization`, which exists only in `frameworks`, does not apply to `framework`
    (`what`: e.g. " training", after the framework's name)."""
    others = ", ".join(FRAMEWORK_LABELS[f] for f in sorted(frameworks))
    return (f"optimization '{optimization}' {OTHER_FRAMEWORK} "
            f"{FRAMEWORK_LABELS[framework]}{what} (only in {others})")
