"""Helpers of the tests under ``test/unit/framework/example/``."""
