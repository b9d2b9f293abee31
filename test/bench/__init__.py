"""The benchmarks: ``make bench`` runs ``python -m bench`` with ``test/`` on ``PYTHONPATH``.

A package so the benchmarks import each other (and ``testutil``) by name, not through
``sys.path``; the tests of the packing heuristics import them the same way.
"""
