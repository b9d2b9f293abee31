"""gpu-control-plane: GPU discovery, allocation and preparation for Kubernetes through DRA."""
