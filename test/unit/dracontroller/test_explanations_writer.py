"""The ClaimExplanation writer: what it asks of the API (a status apply under its own field
manager, a delete with the uid as precondition) and which API errors mean "nothing to do"."""

from __future__ import annotations

import pytest
from kubernetes.client import V1ObjectMeta
from pytest_mock import MockerFixture, MockType

from api.gpu.v1alpha1 import (
    ClaimExplanation,
    ClaimExplanationSpec,
    ClaimExplanationStatus,
    ExplanationOutcome,
)
from pkg.domain.kinds import CLAIM_EXPLANATION
from pkg.dracontroller.explanations.writer import FIELD_MANAGER, ExplanationWriter
from pkg.framework.client import ConflictError, KubeClient, NotFoundError
from pkg.framework.client.errors import ApiError

EXPLANATION = ClaimExplanation(
    metadata=V1ObjectMeta(name="why", namespace="team-a", uid="uid-1"),
    spec=ClaimExplanationSpec(claim_name="claim-1"),
)
STATUS = ClaimExplanationStatus(outcome=ExplanationOutcome.ALLOCATABLE, report="fits on n1")


@pytest.fixture
def client(mocker: MockerFixture) -> MockType:
    """The client the writer makes for its own field manager, which does its requests."""
    own: MockType = mocker.Mock(spec=KubeClient)
    mocker.patch("pkg.dracontroller.explanations.writer.KubeClient", return_value=own)
    return own


@pytest.fixture
def writer(client: MockType, mocker: MockerFixture) -> ExplanationWriter:
    return ExplanationWriter(client=mocker.Mock(spec=KubeClient))


def test_it_writes_through_the_handed_connection_under_a_field_manager_of_its_own(
    mocker: MockerFixture,
) -> None:
    make = mocker.patch("pkg.dracontroller.explanations.writer.KubeClient")
    handed = mocker.Mock(spec=KubeClient)
    ExplanationWriter(client=handed)
    make.assert_called_once_with(handed.api_client, field_manager="gpu-dra-controller-explain")
    assert FIELD_MANAGER == "gpu-dra-controller-explain"


def test_the_answer_is_applied_to_the_status_with_the_uid_as_precondition(
    writer: ExplanationWriter, client: MockType
) -> None:
    writer.answer(EXPLANATION, STATUS)
    client.apply.assert_called_once_with(
        CLAIM_EXPLANATION,
        {
            "metadata": {"name": "why", "namespace": "team-a", "uid": "uid-1"},
            "status": {"outcome": "Allocatable", "report": "fits on n1"},
        },
        subresource="status",
    )


def test_the_delete_names_the_object_and_its_uid(writer: ExplanationWriter, client: MockType) -> None:
    writer.delete(EXPLANATION)
    client.delete.assert_called_once_with(CLAIM_EXPLANATION, "why", "team-a", uid="uid-1")


@pytest.mark.parametrize("error", [NotFoundError, ConflictError], ids=["gone", "replaced"])
def test_an_object_gone_or_replaced_needs_neither_answer_nor_delete(
    writer: ExplanationWriter, client: MockType, error: type[ApiError]
) -> None:
    client.apply.side_effect = error(status=0, reason=error.__name__, message="")
    client.delete.side_effect = error(status=0, reason=error.__name__, message="")
    writer.answer(EXPLANATION, STATUS)
    writer.delete(EXPLANATION)


def test_other_api_errors_propagate_for_a_retry(writer: ExplanationWriter, client: MockType) -> None:
    client.apply.side_effect = ApiError(status=500, reason="InternalError", message="etcd timeout")
    client.delete.side_effect = ApiError(status=500, reason="InternalError", message="etcd timeout")
    with pytest.raises(ApiError):
        writer.answer(EXPLANATION, STATUS)
    with pytest.raises(ApiError):
        writer.delete(EXPLANATION)
