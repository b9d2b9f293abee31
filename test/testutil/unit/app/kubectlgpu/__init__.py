"""Helpers of the tests under ``test/unit/app/kubectlgpu/``."""
