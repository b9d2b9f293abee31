"""The benchmark's trivial controller in kopf: ``kopf run --standalone -n bench kopf_controller.py``.

Written as a kopf user writes a level-based controller: one event handler, which patches the status
through kopf's ``patch`` when the observed value differs (kopf applies the patch after the handler).
"""

from __future__ import annotations

import time
from typing import Any

import kopf

from bench.controllers.bench_item import GROUP, PLURAL, VERSION, needs_reconcile, observed


@kopf.on.event(GROUP, VERSION, PLURAL)
def reconcile(spec: Any, status: Any, patch: kopf.Patch, type: str | None, **_: Any) -> None:
    started = time.time()
    if type == "DELETED" or not needs_reconcile(dict(spec), dict(status), "kopf"):
        return
    patch.status["kopf"] = observed(dict(spec), started)
