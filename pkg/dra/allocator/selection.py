"""Does a device match an alternative's selectors? Cached across allocations.

A selector's verdict depends only on the expression and the device, and a device only changes
with its slice (new pool generation or resourceVersion). So results are cached per
``(expression, driver, pool, device, generation, resourceVersion)``: a controller re-running the
allocator for claim after claim evaluates each expression once per device. Compiled programs are
cached per expression in :class:`~.cel_env.CelEnvironment`. CEL errors are cached too: they are as
deterministic as the verdicts.

Errors are reported like the scheduler's ("class X: selector #0 on device D: CEL runtime error:
…"; a compile error names no device: "class X: selector #0: CEL compile error: …") and, as there,
fail the claim: a broken selector must be fixed, not silently skip devices.

A selector that provably reads only the driver and a few named attributes (its
:class:`~.cel_footprint.Footprint`) is evaluated once per distinct set of those values instead of
once per device: the verdicts are the engine's, on the first device of each set, and a cluster of
identical servers has a handful of sets for hundreds of thousands of devices (see
:mod:`.cel_footprint` for what keeps that exact).
Every failure to evaluate reaches this module as a :class:`~.cel_env.SelectorError` — the
iteration budget, a library function's exception and memory exhaustion included — so no failure
escapes as another exception type.
"""

from __future__ import annotations

import threading
from typing import Any

from pkg.dra.allocator.cel_env import CelEnvironment, SelectorError, device_input
from pkg.dra.allocator.cel_footprint import device_key, plain_attributes
from pkg.dra.allocator.pools import Candidate
from pkg.dra.allocator.requests import Alternative, Selector
from pkg.dra.model import DeviceID

_MAX_CACHE_ENTRIES = 200_000


class SelectorEvaluationError(Exception):
    """A selector could not be evaluated on a device; the message names class/claim and device."""

    def __init__(self, message: str, *, selector: Selector, cel_error: str) -> None:
        super().__init__(message)
        self.selector = selector
        self.cel_error = cel_error


def selector_error(
    selector: Selector, cel_error: str, cand: Candidate | None = None
) -> SelectorEvaluationError:
    """The error as the scheduler words it: a compile error belongs to the selector ("class X:
    selector #0: CEL compile error: …", whatever the device), a runtime error to one device."""
    if selector.compiled.error:
        where = f"{selector.owner}: selector #{selector.index}: CEL compile error"
    else:
        device = f" on device {cand.id}" if cand is not None else ""
        where = f"{selector.owner}: selector #{selector.index}{device}: CEL runtime error"
    return SelectorEvaluationError(f"{where}: {cel_error}", selector=selector, cel_error=cel_error)


class SelectorMatcher:
    def __init__(self, env: CelEnvironment) -> None:
        self.env = env
        self._results: dict[tuple[str, tuple[DeviceID, int, str]], bool | str] = {}
        self._by_values: dict[tuple[str, tuple[object, ...]], bool | str] = {}
        self._lock = threading.Lock()

    def first_mismatch(self, alt: Alternative, cand: Candidate) -> Selector | None:
        """The first selector that is false for the device, or None when all hold.

        Raises :class:`SelectorEvaluationError` when a selector fails to compile or evaluate.
        """
        for selector in alt.selectors:
            if not self.evaluate(selector, cand):
                return selector
        return None

    def evaluate(self, selector: Selector, cand: Candidate) -> bool:
        reads = selector.compiled.reads
        if reads is not None and self._plain(cand):
            values = device_key(reads, cand.pool.id.driver, cand.device)
            verdict = self._cached(self._by_values, (selector.compiled.expression, values), selector, cand)
        else:
            key = (selector.compiled.expression, cand.cache_key)
            verdict = self._cached(self._results, key, selector, cand)
        if isinstance(verdict, str):
            raise selector_error(selector, verdict, cand)
        return verdict

    def _cached(
        self, cache: dict[Any, bool | str], key: object, selector: Selector, cand: Candidate
    ) -> bool | str:
        verdict = cache.get(key)
        if verdict is None:
            verdict = self._evaluate(selector, cand)
            with self._lock:
                if len(cache) >= _MAX_CACHE_ENTRIES:
                    cache.clear()
                cache[key] = verdict
        return verdict

    @staticmethod
    def _plain(cand: Candidate) -> bool:
        """Whether the device's CEL input cannot fail as a whole (checked once per device)."""
        plain = cand.cel_plain
        if plain is None:
            plain = cand.cel_plain = plain_attributes(cand.device)
        return plain

    def _evaluate(self, selector: Selector, cand: Candidate) -> bool | str:
        if cand.cel_input is None:
            cand.cel_input = device_input(cand.id.driver, cand.device)
        try:
            return self.env.matches(selector.compiled, cand.cel_input)
        except SelectorError as err:
            return str(err)
