"""Helpers of the tests under ``test/unit/dra/``."""
