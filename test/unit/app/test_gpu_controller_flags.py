"""gpu-controller's ``--controllers``: the selection, and which controllers it registers."""

from __future__ import annotations

import argparse

import pytest
from pytest_mock import MockerFixture

from pkg.app import gpu_controller
from pkg.app.gpu_controller import CONTROLLERS, controller_selection, register_controllers

ALL = frozenset(CONTROLLERS)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("*", ALL),
        ("computedomain", {"computedomain"}),
        ("gpuclass, computedomain", {"gpuclass", "computedomain"}),
        ("*,-computedomain", ALL - {"computedomain"}),
        ("-nodelabels,*,-orchestrator", ALL - {"nodelabels", "orchestrator"}),
        ("-computedomain", set()),
        ("computedomain,-computedomain", set()),
    ],
)
def test_the_selection_follows_kube_controller_manager(value: str, expected: set[str]) -> None:
    assert controller_selection(value) == expected


@pytest.mark.parametrize("value", ["computedomains", "*,-nope", "-*", "", " , "])
def test_an_unknown_or_empty_selection_is_refused_listing_the_known_names(value: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=r"known: \*, physicalgpu, nodelabels") as error:
        controller_selection(value)
    if value.strip(" ,"):
        assert repr(value.rsplit(",", maxsplit=1)[-1]) in str(error.value)


def test_an_unknown_name_stops_the_start_with_the_known_ones(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        gpu_controller.main(["--controllers", "computedomains"])
    assert stopped.value.code == 2
    assert "unknown controller 'computedomains'; known: *, physicalgpu" in capsys.readouterr().err


def _setups(mocker: MockerFixture) -> dict[str, object]:
    names = {
        "physicalgpu": "setup_physical_gpus",
        "nodelabels": "setup_node_labels",
        "orchestrator": "setup_orchestrator",
        "gpuclass": "setup_gpu_classes",
        "computedomain": "setup_compute_domains",
        "imexensemble": "setup_ensembles",
    }
    return {name: mocker.patch.object(gpu_controller, function) for name, function in names.items()}


def _register(mocker: MockerFixture, controllers: frozenset[str]) -> None:
    register_controllers(
        mocker.Mock(),
        client=mocker.Mock(),
        informers=mocker.Mock(),
        recorder=mocker.Mock(),
        workers=1,
        components_namespace="gpu-system",
        operator_config="gpu-control-plane",
        controllers=controllers,
    )


def test_only_the_chosen_controllers_are_registered(mocker: MockerFixture) -> None:
    setups = _setups(mocker)
    _register(mocker, controller_selection("computedomain"))
    called = {name for name, setup in setups.items() if setup.called}  # type: ignore[attr-defined]
    assert called == {"computedomain", "imexensemble"}  # a domain needs its clique's ensemble


def test_every_controller_is_registered_by_default(mocker: MockerFixture) -> None:
    setups = _setups(mocker)
    _register(mocker, ALL)
    assert all(setup.called for setup in setups.values())  # type: ignore[attr-defined]
