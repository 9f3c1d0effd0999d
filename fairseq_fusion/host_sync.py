"""Where reading a tensor's values on the host costs nothing.

On CUDA, ``.item()``, ``bool()``, ``torch.equal``, ``nonzero`` and a size computed from values wait for every
kernel queued before them (a host sync). Code that saves work by looking at values (skipping a copy that would
not change anything, sizing a tensor exactly) does so only where the look is free, on the CPU, and takes a
path without it elsewhere. ``tests/test_host_syncs.py`` counts the syncs with this returning False (CUDA's path).
"""


def host_reads_are_free(tensor) -> bool:
    return tensor.device.type == "cpu"
