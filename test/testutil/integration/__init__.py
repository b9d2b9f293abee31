"""Helpers of the tests under ``test/integration/``."""
