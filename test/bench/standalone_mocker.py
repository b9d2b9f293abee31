"""pytest-mock's ``mocker`` outside pytest, for a benchmark that builds the unit tests' simulated
node (``preparation_fakes.node``, whose API-facing stand-ins a test's ``mocker`` makes).

Everything under test/ mocks through pytest-mock only (checked by test/unit/architecture); this
gives a script the same :class:`~pytest_mock.MockerFixture` a test receives, undone on leaving as
the fixture is undone at the end of a test.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from pytest_mock import MockerFixture


class _Ini:
    """What :class:`MockerFixture` reads of pytest's configuration: one ini option,
    ``mock_use_standalone_module``, unset in pyproject.toml: the standard library's mock, as under
    pytest."""

    def getini(self, name: str) -> object:
        if name != "mock_use_standalone_module":
            raise ValueError(f"unknown ini option: {name}")  # as pytest answers
        return False


@contextmanager
def standalone_mocker() -> Iterator[MockerFixture]:
    mocker = MockerFixture(_Ini())
    try:
        yield mocker
    finally:
        mocker.stopall()
