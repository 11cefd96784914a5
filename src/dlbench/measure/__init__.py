"""Timing, memory and statistics, independent of any framework: what a framework's
operations give a scenario to time (a step in parts, a decoder), the training loop,
sampling, FLOPs, the environment's fingerprint, correctness, the devices' locks and the
planted faults of dlbench's own tests. Nothing here imports dlbench.frameworks."""
