"""Helpers the tests and benchmarks share: fakes, builders, values and cluster helpers.

Imported as ``testutil.<path>`` (pytest's ``pythonpath`` and the Makefile put ``test/`` on the
search path; ``test`` itself cannot be a package, the standard library owns that name). A helper
lives at the path of the tests that own it, ``testutil/unit/dracontroller/`` for
``test/unit/dracontroller/``, and one that several tiers share at the top; so two helpers may
share a file name, and no test reaches a helper through ``sys.path``.
"""
