"""Benchmarks that print figures; run them with ``make bench`` (``test/bench/run.py``)."""
