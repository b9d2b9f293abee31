"""The error a backend raises for one card, :class:`BackendError`.

A module of its own, importing nothing of the ports, because every side raises it: the backend
port (:mod:`pkg.backends.backend`), the preparation port (whose
:class:`~pkg.backends.preparation.PreparationError` is one) and every vendor's modules. Its users
import it from :mod:`pkg.backends` or :mod:`pkg.backends.backend`, which re-export it.
"""

from __future__ import annotations


class BackendError(Exception):
    """A backend could not read one card; ``address`` names it, ``reason`` is a CamelCase word."""

    def __init__(self, *, address: str, reason: str, message: str) -> None:
        super().__init__(f"GPU {address}: {message}")
        self.address, self.reason, self.message = address, reason, message
