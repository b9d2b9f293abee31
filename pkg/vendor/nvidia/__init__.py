"""The NVIDIA vendor backend (identification only for now; NVML comes with the full port)."""
