"""The ``computeDomains`` block of the operator configuration: off when left out, an image when on,
strict about unknown fields like the rest of the document."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from api.gpu.v1alpha1 import GPUOperatorConfig


def parse(spec: object) -> GPUOperatorConfig:
    return GPUOperatorConfig.model_validate(
        {"apiVersion": "gpu.deckhouse.io/v1alpha1", "kind": "GPUOperatorConfig", "spec": spec}
    )


def test_left_out_means_no_daemons() -> None:
    assert not parse({}).spec.compute_domains.enabled


def test_defaults_of_an_enabled_block() -> None:
    settings = parse({"computeDomains": {"image": "imex:1"}}).spec.compute_domains
    assert (settings.port, settings.privileged, settings.command, settings.readiness_command) == (
        50000,
        True,
        None,
        None,
    )


@pytest.mark.parametrize(
    "block",
    [{}, {"image": "i", "port": 0}, {"image": "i", "readinesCommand": ["true"]}],
    ids=["no image", "port 0", "misspelt field"],
)
def test_bad_blocks_are_refused(block: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        parse({"computeDomains": block})
