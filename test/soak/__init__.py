"""The soak: GPU Pods of every kind we offer, for minutes or hours, while faults strike the local
cluster around them, with invariants checked from outside our code (docs/reliability.md).

Run as ``python -m soak`` with ``PYTHONPATH=test`` (``make soak``, ``make soak-smoke``).
"""
