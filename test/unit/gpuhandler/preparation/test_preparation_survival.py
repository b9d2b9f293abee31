"""What keeps gpu-handler up and the node clean: two shares of one card in one claim, a prepare
that fails on its second MIG device, and the plugin's runnable over a start-up that fails."""

from __future__ import annotations

import dataclasses
import json
import threading
from pathlib import Path
from typing import Any

import pytest
from dependency_injector import providers
from pytest_mock import MockerFixture, MockType
from testutil.unit.gpuhandler.preparation.preparation_fakes import A30, Node, mig_offer, node, whole_offer

from pkg.backends.preparation import PreparationError
from pkg.gpuhandler.preparation import metrics
from pkg.gpuhandler.preparation.checkpoint import PreparePhase
from pkg.gpuhandler.preparation.runnable import PluginRunnable
from pkg.gpuhandler.preparation.startup import StartupReport, reconcile_at_startup


def _instances(n: Node, card: str = A30) -> list[int]:
    return [gi.start for gi in n.card_state(card).gpu_instances]


def _mig_mode(n: Node, card: str = A30) -> int:
    mode: int = n.card_state(card).mig_mode
    return mode


# -- two shares of one card in one claim ---------------------------------------------------------


def test_two_mps_shares_of_one_card_in_one_claim_are_two_cdi_devices(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    n = node(mocker, tmp_path)
    [offer] = n.offers.publish(whole_offer(A30, sharing="MPS"))
    claim = n.claims.allocate("pair", [offer, offer], consumed={"sharePercent": "25"})

    result = n.driver.prepare([claim])[claim.uid]

    assert result.error == ""
    ids = [device.cdi_device_ids[0] for device in result.devices]
    assert len(set(ids)) == 2
    assert all(
        device.cdi_device_ids[1:] == ("k8s.gpu.deckhouse.io/driver=nvidia",) for device in result.devices
    )
    spec = json.loads(n.container.cdi().path_of(claim.uid).read_text())
    assert len(spec["devices"]) == 2
    record = n.container.store().load().claims[claim.uid]
    share_ids = {d.share_id for d in record.devices}
    assert len(share_ids) == 2
    for device in record.devices:
        assert device.share_id is not None
        assert device.cdi_device_ids[0].endswith(device.share_id)
    assert n.driver.unprepare([claim])[claim.uid] == ""


def test_a_record_written_before_share_keys_still_answers_as_written(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    n = node(mocker, tmp_path)
    [offer] = n.offers.publish(whole_offer(A30, sharing="TimeSlicing"))
    claim = n.claims.allocate("old", [offer], consumed={"sharePercent": "10"})
    n.driver.prepare([claim])
    store = n.container.store()
    data = store.load()
    old_id = f"k8s.gpu.deckhouse.io/claim={claim.uid}-{offer.name}"
    data.claims[claim.uid].devices[0].cdi_device_ids = [old_id]
    store.save(data)

    result = n.driver.prepare([claim])[claim.uid]

    assert [list(d.cdi_device_ids) for d in result.devices] == [[old_id]]


# -- a prepare that fails on its second MIG device -----------------------------------------------


def _fail_second_create(n: Node, monkeypatch: pytest.MonkeyPatch) -> None:
    preparer = n.container.preparer()
    original = preparer.create_mig_device
    calls: list[int] = []

    def create(address: str, *, profile_id: int, start: int, size: int) -> Any:
        calls.append(start)
        if len(calls) == 2:
            raise PreparationError(address=address, reason="MigSetupFailed", message="no room")
        return original(address, profile_id=profile_id, start=start, size=size)

    monkeypatch.setattr(preparer, "create_mig_device", create)


def test_a_prepare_failing_on_its_second_mig_device_releases_the_first_and_the_mode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mocker: MockerFixture
) -> None:
    n = node(mocker, tmp_path)
    assert _mig_mode(n) == 0
    first, second = n.offers.publish(mig_offer(A30, start=0), mig_offer(A30, start=1))
    claim = n.claims.allocate("two", [first, second])
    _fail_second_create(n, monkeypatch)

    assert n.driver.prepare([claim])[claim.uid].error != ""

    assert _instances(n) == []
    assert _mig_mode(n) == 0  # back as it was found
    assert n.container.store().load().claims == {}
    assert not n.container.cdi().path_of(claim.uid).exists()


def test_a_rollback_whose_first_release_fails_keeps_the_record_for_start_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mocker: MockerFixture
) -> None:
    n = node(mocker, tmp_path)
    first, second = n.offers.publish(mig_offer(A30, start=0), mig_offer(A30, start=1))
    claim = n.claims.allocate("two", [first, second])
    _fail_second_create(n, monkeypatch)
    preparer = n.container.preparer()

    def stuck(address: str, *, start: int) -> bool:
        raise PreparationError(address=address, reason="MigSetupFailed", message="in use")

    monkeypatch.setattr(preparer, "destroy_mig_device", stuck)

    assert n.driver.prepare([claim])[claim.uid].error != ""

    assert _instances(n) == [0]
    [kept] = n.container.store().load().claims.values()
    assert kept.uid == claim.uid
    assert kept.state is PreparePhase.PREPARE_STARTED
    assert _mig_mode(n) == 1  # the device that would not go keeps the card in MIG mode for now
    monkeypatch.undo()
    report = n.reconcile()
    assert report.rolled_back == [claim.uid]
    assert _instances(n) == []
    assert _mig_mode(n) == 0  # the kept record said how the card was found
    assert n.container.store().load().claims == {}


# -- the plugin's runnable -----------------------------------------------------------------------


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _runnable(mocker: MockerFixture, n: Node, clock: _Clock) -> tuple[PluginRunnable, MockType]:
    c = n.container
    c.settings.override(providers.Object(dataclasses.replace(c.settings(), health_period=0.001)))
    plugin: MockType = mocker.MagicMock()
    c.plugin.override(providers.Object(plugin))
    c.health.override(providers.Object(mocker.MagicMock()))
    return PluginRunnable(c, initial_backoff=10.0, max_backoff=40.0, clock=clock), plugin


class _Rounds(threading.Event):
    """A stop event whose waits pass ``seconds`` on ``clock`` and which stops after ``rounds``."""

    def __init__(self, clock: _Clock, rounds: int, seconds: float = 15.0) -> None:
        super().__init__()
        self._clock, self._left, self._seconds = clock, rounds, seconds

    def wait(self, timeout: float | None = None) -> bool:
        self._clock.now += self._seconds
        self._left -= 1
        return self._left < 0


def _run_rounds(runnable: PluginRunnable, clock: _Clock, rounds: int) -> None:
    runnable.run(_Rounds(clock, rounds))


def test_a_start_up_that_raises_does_not_stop_the_plugin_and_is_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mocker: MockerFixture
) -> None:
    n = node(mocker, tmp_path)
    clock = _Clock()
    runnable, plugin = _runnable(mocker, n, clock)
    calls: list[float] = []
    real = reconcile_at_startup

    def flaky(**kwargs: Any) -> StartupReport:
        calls.append(clock.now)
        if len(calls) < 3:
            raise RuntimeError("something nobody expected")
        return real(**kwargs)

    monkeypatch.setattr("pkg.gpuhandler.preparation.runnable.reconcile_at_startup", flaky)
    before = metrics.startup_failures.labels(step="reconcile")._value.get()

    _run_rounds(runnable, clock, rounds=8)

    plugin.start.assert_called_once()
    plugin.stop.assert_called_once()
    assert metrics.startup_failures.labels(step="reconcile")._value.get() == before + 2
    assert calls == [0.0, 15.0, 45.0]  # backoff 10s, then 20s, then done
    assert not runnable.startup_pending


def test_an_unfinished_start_up_warns_on_the_card_and_is_retried(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    n = node(mocker, tmp_path)
    [offer] = n.offers.publish(mig_offer(A30, start=0))
    claim = n.claims.allocate("lost", [offer])
    n.driver.prepare([claim])
    store = n.container.store()
    data = store.load()
    data.claims[claim.uid].state = PreparePhase.PREPARE_STARTED
    data.claims[claim.uid].devices[0].card = "0000:99:00.0"
    store.save(data)
    events = mocker.MagicMock()
    n.container.events.override(providers.Object(events))
    clock = _Clock()
    runnable, plugin = _runnable(mocker, n, clock)

    _run_rounds(runnable, clock, rounds=2)

    plugin.start.assert_called_once()
    assert runnable.startup_pending
    card, kwargs = events.card_warning.call_args.args[0], events.card_warning.call_args.kwargs
    assert card == "0000:99:00.0"
    assert kwargs["reason"] == "StartupIncomplete"
    assert events.card_warning.call_count == 2  # the first round and the retry


def test_a_release_whose_mode_switch_fails_still_removes_the_spec_and_raises(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mocker: MockerFixture
) -> None:
    n = node(mocker, tmp_path)
    [offer] = n.offers.publish(mig_offer(A30, start=0))
    claim = n.claims.allocate("one", [offer])
    n.driver.prepare([claim])
    data = n.container.store().load()
    preparer = n.container.preparer()

    def stuck(address: str, *, enabled: bool) -> None:
        raise PreparationError(address=address, reason="MigSetupFailed", message="reset pending")

    monkeypatch.setattr(preparer, "set_mig_mode", stuck)

    with pytest.raises(PreparationError, match="reset pending"):
        n.container.release().release(data.claims[claim.uid], data, found_mig_modes={A30: False})

    assert _instances(n) == []
    assert not n.container.cdi().path_of(claim.uid).exists()
