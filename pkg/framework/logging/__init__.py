"""Structured JSON logging configured from the environment (``LOG_*``).

Call :func:`setup_logging` once at process start; give each controller its own logger with
:func:`new_controller_logger`; other modules use ``logging.getLogger(__name__)`` as usual and pass
context through ``extra=``, which lands as JSON fields.
"""

from pkg.framework.logging.json_formatter import JsonFormatter
from pkg.framework.logging.setup import (
    LogConfigError,
    LogSettings,
    new_controller_logger,
    parse_settings,
    settings,
    setup_logging,
    verbosity,
)

__all__ = [
    "JsonFormatter",
    "LogConfigError",
    "LogSettings",
    "new_controller_logger",
    "parse_settings",
    "settings",
    "setup_logging",
    "verbosity",
]
