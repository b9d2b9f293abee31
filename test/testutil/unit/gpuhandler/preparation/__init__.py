"""Helpers of the tests under ``test/unit/gpuhandler/preparation/``."""
