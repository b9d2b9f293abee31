"""A missing CRD is named at start-up, instead of surfacing minutes later as a cache-sync timeout."""

from __future__ import annotations

from typing import Any

import pytest
from pytest_mock import MockerFixture

from pkg.domain.kinds import CLAIM_EXPLANATION, PHYSICAL_GPU
from pkg.dracontroller.setup import MissingCustomResourceError, require_custom_kinds
from pkg.framework.client import ApiError, KubeClient, ListPage, NotFoundError


def client(mocker: MockerFixture, error: Exception | None) -> Any:
    fake = mocker.MagicMock(spec=KubeClient)
    fake.list_page.side_effect = error or (lambda *a, **k: ListPage([], "1", ""))
    return fake


def test_missing_crd_is_named(mocker: MockerFixture) -> None:
    with pytest.raises(MissingCustomResourceError, match=r"physicalgpus\.gpu\.deckhouse\.io"):
        require_custom_kinds(
            client(mocker, NotFoundError(status=404, reason="NotFound", message="not found"))
        )


def test_served_kinds_pass_with_one_small_list_each(mocker: MockerFixture) -> None:
    fake = client(mocker, None)
    require_custom_kinds(fake)
    assert fake.list_page.call_args_list == [
        mocker.call(PHYSICAL_GPU, limit=1),
        mocker.call(CLAIM_EXPLANATION, limit=1),
    ]


def test_other_errors_are_left_to_the_informers_retries(mocker: MockerFixture) -> None:
    require_custom_kinds(client(mocker, ApiError(status=503, reason="ServiceUnavailable", message="etcd")))
