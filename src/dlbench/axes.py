"""The fixed values of the matrix axes that are not registries of their own."""

FRAMEWORKS = ("pytorch", "tensorflow")
DEVICES = ("cpu", "gpu")
FRAMEWORK_LABELS = {"pytorch": "PyTorch", "tensorflow": "TensorFlow"}
