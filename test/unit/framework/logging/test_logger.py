"""Logging from the environment: parsing, JSON shape, per-controller debug."""

from __future__ import annotations

import io
import json
import logging
import re
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from pkg.framework.logging import (
    LogConfigError,
    LogSettings,
    new_controller_logger,
    parse_settings,
    setup_logging,
    verbosity,
)


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    """Each test configures the root logger; put it back as pytest had it."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    setup_logging({}, stream=io.StringIO())  # default settings, controller loggers back to NOTSET
    root.handlers[:] = handlers
    root.setLevel(level)


def configure(env: dict[str, str]) -> io.StringIO:
    stream = io.StringIO()
    setup_logging(env, stream=stream)
    return stream


def lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_defaults() -> None:
    assert parse_settings({}) == LogSettings(level=logging.INFO, output="stderr", verbosity=0)


def test_values_are_case_insensitive_and_trimmed() -> None:
    settings = parse_settings(
        {
            "LOG_LEVEL": "DEBUG",
            "LOG_OUTPUT": "StdOut",
            "LOG_DEBUG_VERBOSITY": "10",
            "LOG_DEBUG_CONTROLLER_LIST": " physicalgpu, ,gpuclass ",
        }
    )
    assert settings == LogSettings(
        level=logging.DEBUG,
        output="stdout",
        verbosity=10,
        debug_controllers=frozenset({"physicalgpu", "gpuclass"}),
    )
    assert parse_settings({"LOG_LEVEL": "warn"}).level == logging.WARNING
    assert parse_settings({"LOG_LEVEL": "Error"}).level == logging.ERROR


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("LOG_LEVEL", "verbose"),
        ("LOG_OUTPUT", "file"),
        ("LOG_DEBUG_VERBOSITY", "-1"),
        ("LOG_DEBUG_VERBOSITY", "x"),
    ],
)
def test_invalid_values_name_the_variable(variable: str, value: str) -> None:
    with pytest.raises(LogConfigError, match=f"^{variable}=") as raised:
        parse_settings({variable: value})
    assert raised.value.variable == variable


def test_output_goes_to_the_chosen_stream(capsys: pytest.CaptureFixture[str]) -> None:
    setup_logging({"LOG_OUTPUT": "stdout"})
    logging.getLogger("test.out").info("to stdout")
    captured = capsys.readouterr()
    assert json.loads(captured.out)["msg"] == "to stdout"
    assert "to stdout" not in captured.err


def test_json_shape_with_extras_and_exception() -> None:
    stream = configure({})
    log = logging.getLogger("test.shape")
    log.info("prepared %s", "gpu-0", extra={"node": "worker-1", "devices": 2})
    try:
        raise ValueError("boom")
    except ValueError:
        log.exception("prepare failed")
    first, second = lines(stream)
    assert set(first) == {"time", "level", "logger", "msg", "node", "devices"}
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", first["time"])
    assert (first["level"], first["logger"], first["msg"]) == ("info", "test.shape", "prepared gpu-0")
    assert (first["node"], first["devices"]) == ("worker-1", 2)
    assert second["level"] == "error"
    assert "ValueError: boom" in second["exception"]


def test_unserialisable_extras_are_rendered_as_text() -> None:
    stream = configure({})
    logging.getLogger("test.obj").warning("odd", extra={"value": object()})
    entry = lines(stream)[0]
    assert entry["level"] == "warn"
    assert entry["value"].startswith("<object object at")


def test_level_hides_debug_but_listed_controllers_log_debug() -> None:
    stream = configure({"LOG_LEVEL": "Info", "LOG_DEBUG_CONTROLLER_LIST": "physicalgpu"})
    listed, other = new_controller_logger("physicalgpu"), new_controller_logger("gpuclass")
    listed.debug("listed debug", extra={"gpu": "gpu-0"})
    other.debug("other debug")
    logging.getLogger("urllib3").debug("library debug")
    noisy = logging.getLogger("noisy.library")
    noisy.setLevel(logging.DEBUG)  # a library turning itself up must not leak past LOG_LEVEL
    noisy.debug("noisy debug")
    other.info("other info")
    entries = lines(stream)
    assert [e["msg"] for e in entries] == ["listed debug", "other info"]
    assert entries[0]["controller"] == "physicalgpu"
    assert entries[0]["gpu"] == "gpu-0"  # the call's own extra survives the adapter
    assert entries[0]["logger"] == "controller.physicalgpu"
    noisy.setLevel(logging.NOTSET)


def test_controller_logger_created_before_setup_follows_the_new_settings() -> None:
    log = new_controller_logger("gpuclass")
    stream = configure({"LOG_DEBUG_CONTROLLER_LIST": "gpuclass"})
    log.debug("now visible")
    stream2 = configure({})
    log.debug("hidden again")
    assert [e["msg"] for e in lines(stream)] == ["now visible"]
    assert lines(stream2) == []


def test_setup_is_idempotent_and_exposes_verbosity() -> None:
    root = logging.getLogger()
    before = len(root.handlers)
    configure({"LOG_DEBUG_VERBOSITY": "3"})
    stream = configure({"LOG_DEBUG_VERBOSITY": "5"})
    assert len(root.handlers) == before + 1
    assert verbosity() == 5
    logging.getLogger("test.once").warning("once")
    assert len(lines(stream)) == 1


def test_a_listed_controller_logs_its_debug_lines_and_another_does_not() -> None:
    """LOG_DEBUG_CONTROLLER_LIST end to end: two real controllers reconcile one request each at
    level Info; only the listed one's debug line ("reconciled: success") is written."""
    from pkg.framework.controller.controller import Controller
    from pkg.framework.reconcile import Request, Result

    stream = configure({"LOG_LEVEL": "Info", "LOG_DEBUG_CONTROLLER_LIST": "physicalgpu"})

    class Done:
        def __init__(self) -> None:
            self.event = threading.Event()

        def reconcile(self, request: Request) -> Result:
            self.event.set()
            return Result()

    for name in ("physicalgpu", "resourceclaim"):
        reconciler = Done()
        controller = Controller(name=name, reconciler=reconciler)
        controller.queue.add(Request("gpu-0"))
        stop = threading.Event()
        thread = threading.Thread(target=controller.run, args=(stop,))
        thread.start()
        assert reconciler.event.wait(2.0)
        stop.set()
        thread.join(5.0)
    debug = [line for line in lines(stream) if line["level"] == "debug"]
    assert [(line["controller"], line["msg"]) for line in debug] == [("physicalgpu", "reconciled: success")]
    assert {line["controller"] for line in lines(stream)} == {"physicalgpu", "resourceclaim"}  # info lines
