"""The kubelet plugin's life in the gpu-handler's manager: reconcile, serve, refresh, leave.

:class:`PluginRunnable` runs what :class:`~.setup.PreparationContainer` builds: start-up
reconciliation under the node lock first, then the sockets (so the kubelet never calls before the
node matches its checkpoint), a periodic round (the base CDI spec and its condition, the kinds'
round, start-up again while it left work; the health list has a loop of its own), and on stop the
sockets go away (the kubelet deregisters this instance) and, when this was the node's last
instance with nothing prepared, the base CDI spec too. MPS daemons are not stopped with the plugin:
they serve running workloads, and the next instance adopts them (start-up reconciliation).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from functools import partial

from api.gpu.v1alpha1 import PhysicalGPU
from pkg.domain.names import DRIVER
from pkg.framework.cache.informer import SharedInformer
from pkg.framework.kubeletplugin.server import KubeletPlugin
from pkg.framework.kubeletplugin.sockets import any_instance_serves
from pkg.gpuhandler.health import HealthTracker
from pkg.gpuhandler.node_lock import NodeLockTimeoutError, node_lock
from pkg.gpuhandler.preparation import metrics
from pkg.gpuhandler.preparation.cdi import DriverSpec
from pkg.gpuhandler.preparation.checkpoint import CheckpointError, CheckpointFeed, CheckpointStore
from pkg.gpuhandler.preparation.driver_files_status import KubeDriverFilesStatus
from pkg.gpuhandler.preparation.health_feed import HealthFeed
from pkg.gpuhandler.preparation.kinds import Kinds
from pkg.gpuhandler.preparation.services import CardChanges, RecorderClaimEvents
from pkg.gpuhandler.preparation.setup import PluginSettings, PreparationContainer
from pkg.gpuhandler.preparation.startup import StartupReport, reconcile_at_startup

logger = logging.getLogger(__name__)


class PluginRunnable:
    """The plugin's life in the manager: reconcile, serve, refresh health, stop.

    Nothing here takes gpu-handler down (the manager stops the process when a runnable raises):
    a start-up reconciliation that could not finish is reported (a Warning event on each card
    involved, ``gpu_handler_startup_failures_total``) and run again on later rounds, with
    backoff, while the plugin serves; a failed health refresh or periodic round of the kinds is logged
    and the next round tries again.
    """

    name = "kubelet-plugin"
    needs_leader_election = False

    def __init__(
        self,
        container: PreparationContainer,
        *,
        initial_backoff: float = 10.0,
        max_backoff: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._container = container
        self._initial = initial_backoff
        self._max = max_backoff
        self._clock = clock
        self._backoff = initial_backoff
        self._retry_at: float | None = None  # when start-up runs again; None: it finished

    @property
    def startup_pending(self) -> bool:
        """Whether start-up reconciliation left work for a later round."""
        return self._retry_at is not None

    def run(self, stop: threading.Event) -> None:
        settings: PluginSettings = self._container.settings()
        self._startup_round(settings, first=True)
        plugin: KubeletPlugin = self._container.plugin()
        health: HealthFeed = self._container.health()
        tracker: HealthTracker = self._container.health_tracker()
        tracker.subscribe(lambda _address, _old, _new: health.stale.set())
        _safely("health refresh", health.refresh)
        rebuilds = threading.Thread(
            target=partial(health.run, stop, period=settings.health_period), name="health-feed", daemon=True
        )
        rebuilds.start()
        driver_spec: DriverSpec = self._container.driver_spec()
        driver_status: KubeDriverFilesStatus = self._container.driver_files_status()
        _safely("driver files", driver_spec.refresh)  # the base spec before the first claim
        plugin.start()
        try:
            while not stop.wait(settings.health_period):
                _safely("driver files", driver_spec.refresh)
                _safely("driver files condition", driver_status.sync)  # PhysicalGPUs that came since
                self._follow(settings)
                if self._retry_at is not None and self._clock() >= self._retry_at:
                    self._startup_round(settings, first=False)
        finally:
            health.stale.set()  # wakes the rebuild loop, which sees the stop
            rebuilds.join(timeout=5.0)
            plugin.stop()
            store: CheckpointStore = self._container.store()
            _safely("base CDI spec", partial(leave_node, settings, store=store, driver_spec=driver_spec))

    def _follow(self, settings: PluginSettings) -> None:
        """The periodic round of the kinds (:meth:`~.kinds.DeviceKind.follow`) and the checkpoint's
        listeners, with the checkpoint read fresh under the node lock."""
        kinds: Kinds = self._container.kinds()
        store: CheckpointStore = self._container.store()
        feed: CheckpointFeed = self._container.feed()
        try:
            # A short wait: a busy lock means Prepare/Unprepare are at work; the next round comes soon.
            with node_lock(settings.lock_path, timeout=1.0):
                checkpoint = store.load()  # another instance (a rolling update) may have changed it
                feed.publish(checkpoint)
                for kind in kinds:
                    _safely(f"periodic round of {kind.name}", partial(kind.follow, checkpoint))
        except (NodeLockTimeoutError, CheckpointError) as exc:
            logger.debug("periodic round skipped: %s", exc)
        except Exception:  # the next round tries again; the plugin keeps serving
            logger.exception("periodic round failed")

    def _startup_round(self, settings: PluginSettings, *, first: bool) -> None:
        """One start-up reconciliation; never raises. Unfinished work is retried with backoff."""
        try:
            done = self._reconcile(settings, lock_timeout=settings.lock_timeout if first else 1.0)
        except NodeLockTimeoutError as exc:  # Prepare/Unprepare at work: soon again
            logger.warning("start-up reconciliation waits for the node lock: %s", exc)
            done = False
        except Exception as exc:
            metrics.startup_failures.labels(step="reconcile").inc()
            logger.exception("start-up reconciliation failed; serving anyway, trying again later: %s", exc)
            done = False
        if done:
            self._retry_at = None
            self._backoff = self._initial
            return
        self._retry_at = self._clock() + self._backoff
        logger.warning("start-up reconciliation unfinished, next try in %.0fs", self._backoff)
        self._backoff = min(self._backoff * 2, self._max)

    def _reconcile(self, settings: PluginSettings, *, lock_timeout: float) -> bool:
        """Start-up reconciliation under the node lock; whether it finished."""
        gpus: SharedInformer[PhysicalGPU] = self._container.gpu_informer()
        cards = sorted(
            g.status.pci_info.address
            for g in gpus.store.list()
            if g.status is not None and g.status.pci_info is not None
        )
        try:
            with node_lock(settings.lock_path, timeout=lock_timeout):
                report = reconcile_at_startup(
                    store=self._container.store(),
                    claims=self._container.claims(),
                    release=self._container.record_release(),
                    kinds=self._container.kinds(),
                    cdi=self._container.cdi(),
                    cards=lambda: cards,
                )
                if report.checkpoint is not None:
                    feed: CheckpointFeed = self._container.feed()
                    feed.publish(report.checkpoint)
        except CheckpointError as exc:
            # Serve anyway: every prepare then fails with this reason, visibly, on each claim.
            metrics.startup_failures.labels(step="load-checkpoint").inc()
            logger.error("start-up reconciliation skipped: %s", exc)
            return False
        changes: CardChanges = self._container.card_changes()
        for card in sorted(report.changed_cards):
            _safely("card change", partial(changes.changed, card))
        self._warn_cards(report)
        logger.info(
            "start-up reconciliation done",
            extra={
                "stale_boot": len(report.stale_boot),
                "rolled_back": len(report.rolled_back),
                "unprepared": len(report.unprepared),
                "orphan_cdi_specs": len(report.orphan_cdi_specs),
                **{what.replace(" ", "_"): len(items) for what, items in sorted(report.node.items())},
                "failures": len(report.failures),
            },
        )
        return report.complete

    def _warn_cards(self, report: StartupReport) -> None:
        """A Warning event on the PhysicalGPU of each card a start-up step could not finish."""
        events: RecorderClaimEvents = self._container.events()
        by_card: dict[str, list[str]] = {}
        for failure in report.failures:
            if failure.card is not None:
                by_card.setdefault(failure.card, []).append(f"{failure.step}: {failure.error}")
        for card, problems in sorted(by_card.items()):
            message = "start-up reconciliation left work for a later round: " + "; ".join(problems)
            warn = partial(events.card_warning, card, reason="StartupIncomplete", message=message[:1000])
            _safely("start-up event", warn)


def leave_node(settings: PluginSettings, *, store: CheckpointStore, driver_spec: DriverSpec) -> bool:
    """Removes the base CDI spec when this instance was the node's last and no claim is prepared
    (the release is uninstalled); whether it did. A prepared claim's containers need the spec to
    restart, and during a rolling update the newer instance, already serving, keeps it current."""
    with node_lock(settings.lock_path, timeout=5.0):
        if store.load().claims:
            return False
        if any_instance_serves(kubelet_root=settings.kubelet_root, driver=DRIVER):
            return False
        if not driver_spec.withdraw():
            return False
    logger.info("base CDI spec removed: no claim is prepared and no other instance serves")
    return True


def _safely(what: str, action: Callable[[], object]) -> None:
    """Runs ``action``; a failure is logged, never raised (the plugin keeps serving)."""
    try:
        action()
    except Exception:
        logger.exception("%s failed", what)
