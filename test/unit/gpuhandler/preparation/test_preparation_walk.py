"""How far a reader follows one MIG claim through NodePrepare: at most 13 files above the vendor
port, and none of another kind's modules (the kinds are matched by their declared offers, so
planning a MIG device never enters the passed-through card's or the share's module). The 13th is
the base spec's supplied files (supplied_files.py): the driver-files step checks they are in place."""

from __future__ import annotations

from pytest_mock import MockerFixture
from testutil.unit.gpuhandler.preparation.prepare_walk_trace import walk

MAX_FILES = 13
KINDS = "gpuhandler/preparation/kinds/"


def test_a_mig_claim_visits_at_most_thirteen_files_above_the_vendor_port(mocker: MockerFixture) -> None:
    files = set(walk(mocker, skip=("backends/",)))
    assert len(files) <= MAX_FILES, sorted(files)
    assert "gpuhandler/preparation/kinds/mig.py" in files  # the walk is the real one


def test_a_mig_claim_enters_no_other_kinds_module(mocker: MockerFixture) -> None:
    kinds = {f for f in walk(mocker, skip=("backends/",)) if f.startswith(KINDS)}
    assert kinds == {f"{KINDS}__init__.py", f"{KINDS}mig.py"}
