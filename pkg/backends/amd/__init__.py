"""The AMD Instinct backend: cards driven by ``amdgpu``, read and partitioned through sysfs alone.

No ROCm library is loaded: everything the backend needs is in the driver's sysfs files (memory,
unique ID, compute and memory partition modes, RAS error counters) and in the KFD topology,
which names each compute partition's render node (docs/backends/amd.md).
"""
