"""Helpers of the tests under ``test/e2e/``."""
