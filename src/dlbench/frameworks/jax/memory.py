"""JAX's GPU memory figures as the record keeps them, read from a device's memory_stats()
(a module of its own: it needs no JAX, and importing the backend sets the process's
environment for a JAX cell)."""


def device_peaks(stats: dict) -> dict[str, float | str]:
    """The record's GPU memory peaks from a device's memory_stats(): the peak in use, and as
    "reserved" (PyTorch's name for what its caching allocator holds) the peak of the
    allocator's pool. XLA's BFC allocator also reports `peak_bytes_reserved`, 0 there
    (seen on an H100, JAX 0.11): a figure that is 0 or absent is left out, not recorded as
    0 MiB."""
    found: dict[str, float | str] = {
        "device_method": "jax Device.memory_stats(): peak_bytes_in_use, and the allocator's "
                         "pool (peak_pool_bytes) as reserved: peaks since the process "
                         "started, which JAX cannot reset (in a group of cells, the largest "
                         "so far)"}
    for column, keys in (("device_allocated_peak_mb", ("peak_bytes_in_use",)),
                         ("device_reserved_peak_mb", ("peak_pool_bytes",
                                                      "peak_bytes_reserved"))):
        value = next((stats[key] for key in keys if stats.get(key)), None)
        if value is not None:
            found[column] = value / 2**20
    return found
