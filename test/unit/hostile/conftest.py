"""The hostile-input suite: generated and adversarial inputs at every boundary where input enters.

Registers the Hypothesis profile the unit tier runs with: derandomized
(the same examples every run, so a failure in CI is a failure on every machine), no example
database, and no deadline — each case runs in a child process with its own CPU, memory and
wall-clock bounds (:mod:`testutil.unit.hostile.bounded`), which is where time and memory are checked. Set
``HYPOTHESIS_PROFILE=explore`` for a longer, randomized run when hunting for new failures.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

_SLOW = [HealthCheck.too_slow, HealthCheck.data_too_large]
settings.register_profile(
    "unit", max_examples=40, derandomize=True, database=None, deadline=None, suppress_health_check=_SLOW
)
settings.register_profile(
    "explore", max_examples=1000, derandomize=False, deadline=None, suppress_health_check=_SLOW
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "unit"))
