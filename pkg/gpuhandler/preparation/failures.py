"""Why a claim's preparation failed, as a word a metric can carry and a sentence a person can read.

Steps raise :class:`PrepareFailedError` with a CamelCase ``reason``; errors from below (the backend's
:class:`~pkg.backends.preparation.PreparationError`, an unreadable checkpoint, the node lock) are
mapped to one by :func:`~.driver.reason_of`, so the ``reason`` label never depends on message text.
"""

from __future__ import annotations


class PrepareFailedError(Exception):
    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
