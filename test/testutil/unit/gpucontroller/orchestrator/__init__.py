"""Helpers of the tests under ``test/unit/gpucontroller/orchestrator/``."""
