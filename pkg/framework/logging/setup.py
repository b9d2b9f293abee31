"""Process-wide logging, configured from the environment (``LOG_*``).

``LOG_LEVEL`` (Debug/Info/Warn/Error, any case; default Info), ``LOG_OUTPUT`` (stdout/stderr;
default stderr), ``LOG_DEBUG_VERBOSITY`` (an integer ≥ 0 for deep debug; default 0) and
``LOG_DEBUG_CONTROLLER_LIST`` (comma-separated controller names logged at Debug whatever the level).

How the per-controller debug works: the root logger's level is the global level, so debug records
of other loggers are never even built. A controller's logger (``controller.<name>``, see
:func:`new_controller_logger`) on the list gets level Debug of its own, so its debug records are
built; the handler's :class:`_LevelFilter` then lets through records at the global level plus any
record of a listed controller. The filter is needed because a library may set its own logger to
Debug, and that must not leak past the configured level.

:func:`setup_logging` is idempotent: calling it again (tests, a re-read environment) replaces the
handler it installed instead of adding a second one.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TextIO

from pkg.framework.logging.json_formatter import JsonFormatter

CONTROLLER_LOGGER_PREFIX = "controller."

_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warn": logging.WARNING,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}


class LogConfigError(ValueError):
    """An environment variable holds a value the logger does not understand."""

    def __init__(self, variable: str, value: str, expected: str):
        super().__init__(f"{variable}={value!r} is invalid: expected {expected}")
        self.variable = variable


@dataclass(frozen=True)
class LogSettings:
    level: int = logging.INFO
    output: str = "stderr"
    verbosity: int = 0
    debug_controllers: frozenset[str] = frozenset()


def parse_settings(env: Mapping[str, str]) -> LogSettings:
    """Reads the four variables; empty or unset means the default."""
    level_text = env.get("LOG_LEVEL", "").strip()
    level = _LEVELS.get(level_text.lower(), -1) if level_text else logging.INFO
    if level < 0:
        raise LogConfigError("LOG_LEVEL", level_text, "one of Debug, Info, Warn, Error")
    output = env.get("LOG_OUTPUT", "").strip().lower() or "stderr"
    if output not in ("stdout", "stderr"):
        raise LogConfigError("LOG_OUTPUT", output, "stdout or stderr")
    verbosity_text = env.get("LOG_DEBUG_VERBOSITY", "").strip() or "0"
    if not verbosity_text.isdigit():
        raise LogConfigError("LOG_DEBUG_VERBOSITY", verbosity_text, "a non-negative integer")
    names = env.get("LOG_DEBUG_CONTROLLER_LIST", "").split(",")
    controllers = frozenset(name.strip() for name in names if name.strip())
    return LogSettings(
        level=level, output=output, verbosity=int(verbosity_text), debug_controllers=controllers
    )


class _LevelFilter(logging.Filter):
    """Passes records at the global level, and every record of a debug-listed controller."""

    def __init__(self, settings: LogSettings):
        super().__init__()
        self._settings = settings

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= self._settings.level:
            return True
        controller = getattr(record, "controller", None) or _controller_of(record.name)
        return controller in self._settings.debug_controllers


class _ControllerAdapter(logging.LoggerAdapter[logging.Logger]):
    """Adds ``controller`` to every record and keeps the call's own ``extra`` (the stock adapter of
    Python 3.11 would replace it)."""

    def process(self, msg: Any, kwargs: Any) -> tuple[Any, Any]:
        kwargs["extra"] = {**(self.extra or {}), **(kwargs.get("extra") or {})}
        return msg, kwargs


_settings = LogSettings()
_handler: logging.Handler | None = None
_controllers: set[str] = set()


def setup_logging(env: Mapping[str, str] | None = None, *, stream: TextIO | None = None) -> LogSettings:
    """Configures the root logger from ``env`` (default ``os.environ``); ``stream`` overrides
    ``LOG_OUTPUT`` (tests). Raises :class:`LogConfigError` naming the bad variable."""
    global _settings, _handler
    settings = parse_settings(os.environ if env is None else env)
    handler = logging.StreamHandler(stream or (sys.stdout if settings.output == "stdout" else sys.stderr))
    handler.setFormatter(JsonFormatter())
    handler.addFilter(_LevelFilter(settings))
    root = logging.getLogger()
    if _handler is not None:
        root.removeHandler(_handler)
    root.addHandler(handler)
    root.setLevel(settings.level)
    logging.captureWarnings(True)
    _settings, _handler = settings, handler
    for name in _controllers:
        _apply_controller_level(name)
    return settings


def verbosity() -> int:
    """``LOG_DEBUG_VERBOSITY``: how deep debug logging goes (0 when unset); e.g. log raw API
    payloads only when ``verbosity() >= 5``."""
    return _settings.verbosity


def settings() -> LogSettings:
    return _settings


def new_controller_logger(name: str) -> logging.LoggerAdapter[logging.Logger]:
    """The logger of controller ``name``: logger ``controller.<name>``, field ``controller``."""
    _controllers.add(name)
    _apply_controller_level(name)
    return _ControllerAdapter(logging.getLogger(CONTROLLER_LOGGER_PREFIX + name), {"controller": name})


def _apply_controller_level(name: str) -> None:
    level = logging.DEBUG if name in _settings.debug_controllers else logging.NOTSET
    logging.getLogger(CONTROLLER_LOGGER_PREFIX + name).setLevel(level)


def _controller_of(logger_name: str) -> str | None:
    if not logger_name.startswith(CONTROLLER_LOGGER_PREFIX):
        return None
    return logger_name[len(CONTROLLER_LOGGER_PREFIX) :].split(".", 1)[0]
