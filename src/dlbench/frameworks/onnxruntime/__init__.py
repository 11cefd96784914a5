"""ONNX Runtime: `about` declares it (light: no onnxruntime), `backend` is what every
scenario needs, `export` turns the shared PyTorch weights into an ONNX model once per model,
and `inference` runs it (the only scenario it measures: an inference runtime)."""
