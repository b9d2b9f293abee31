"""Checkpoints written by the release before the kinds owned their records, one of every earlier
format (1: whole cards and MIG devices; 2: + shares; 3: + passed-through cards; 4: + partitions;
5: + vGPUs), read by this one: nothing lost or renamed, each device found to be of its kind, and the
file written again asks for the same reader it asked for."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pytest_mock import MockerFixture
from testutil.unit.gpuhandler.preparation.preparation_fakes import node

from pkg.gpuhandler.preparation.checkpoint import CheckpointFile
from pkg.gpuhandler.preparation.kinds import Kinds
from pkg.gpuhandler.preparation.setup import RECORD_TYPES

FIXTURES = Path(__file__).parent / "fixtures"
KIND_OF_CLAIM = {
    "whole": "whole card",
    "mig": "MIG device",
    "share": "share",
    "vm": "passed-through card",
    "part": "partition",
    "vgpu": "vGPU",
}


@pytest.mark.parametrize("version", [1, 2, 3, 4, 5])
def test_a_checkpoint_of_every_earlier_format_reads_the_same(
    tmp_path: Path, version: int, mocker: MockerFixture
) -> None:
    source = FIXTURES / f"checkpoint-format-{version}.json"
    raw = json.loads(source.read_text())
    kinds: Kinds = node(mocker, tmp_path / "node").container.kinds()

    data = CheckpointFile(source, RECORD_TYPES).parse(source.read_bytes())

    assert data.model_dump(mode="json", by_alias=True) == raw["data"]  # nothing lost or renamed
    found = {claim.name: kinds.of(claim.devices[0]).name for claim in data.claims.values()}
    assert found == {name: KIND_OF_CLAIM[name] for name in found}
    assert len(found) == version + 1
    copy = CheckpointFile(tmp_path / "checkpoint.json", RECORD_TYPES)
    copy.save(data)
    assert json.loads(copy.path.read_text())["minReaderVersion"] == raw["minReaderVersion"] == version
