"""The node's base CDI spec kept in step with the loaded driver, and its state on each PhysicalGPU.

:class:`DriverSpec` asks the backend for the driver's user space
(:meth:`~pkg.backends.backend.VendorBackend.driver_files`: one NVML call while the driver version
is unchanged, a new discovery when it changed) and writes the base spec when its content changed.
Prepare asks it before it changes anything on the node, so a driver upgrade rewrites the base spec
before any new Prepare answers, and a driver root that is missing or incomplete fails the Prepare
with the reason, instead of handing out a spec that lacks ``libcuda``. Start-up and the plugin's
periodic round ask too, so the spec exists before the first claim and the state is visible while
no claim comes.

The state is the ``DriverFilesReady`` condition of each of the node's PhysicalGPUs, written by
server-side apply under a field manager of its own (``gpu-handler-driver-files``), so it owns that
one entry and neither the enrichment's apply nor the validator's touch it; and a Warning event on
each card when the state turns bad.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Protocol

from api.gpu.v1alpha1 import PhysicalGPU
from pkg.backends.driver_files import DriverFiles, DriverFilesError
from pkg.domain.kinds import PHYSICAL_GPU
from pkg.framework.client import KubeClient
from pkg.framework.events.recorder import EventRecorderLogger
from pkg.framework.reconcile.conditions import find_condition, normalize_time, now_utc
from pkg.gpuhandler.preparation.atomic_file import remove_file
from pkg.gpuhandler.preparation.cdi import CdiSpecs, driver_device_id
from pkg.gpuhandler.preparation.failures import PrepareFailedError

logger = logging.getLogger(__name__)

CONDITION: Final = "DriverFilesReady"
FIELD_MANAGER: Final = "gpu-handler-driver-files"
REASON_FOUND: Final = "DriverFilesFound"


@dataclass(frozen=True)
class DriverFilesState:
    """What the last look at the driver root found: a condition's status, reason and message."""

    ready: bool
    reason: str
    message: str


class DriverFilesStatus(Protocol):
    def report(self, state: DriverFilesState) -> None:
        """Makes ``state`` the node's; reported to the PhysicalGPUs on :meth:`sync`."""
        ...

    def sync(self) -> None:
        """Writes the state to each PhysicalGPU of the node whose condition differs."""
        ...


class DriverSpec:
    """Writes ``vendor``'s base spec from the backend's driver files; answers its CDI device ID."""

    def __init__(
        self, *, files: Callable[[], DriverFiles], cdi: CdiSpecs, vendor: str, status: DriverFilesStatus
    ) -> None:
        self._files = files
        self._cdi = cdi
        self._vendor = vendor
        self._status = status
        self._written: DriverFiles | None = None  # what the file holds, as this instance wrote it

    def device_id(self) -> str:
        """The base spec's CDI device ID, the spec current; :class:`PrepareFailedError` when the
        driver's user space cannot be given to containers."""
        try:
            files = self._files()
            # The same files already written and the file in place: nothing to read or write.
            if files is not self._written or not self._cdi.driver_path(self._vendor).exists():
                self._cdi.write_driver(self._vendor, files)
                logger.info(
                    "base CDI spec current",
                    extra={
                        "driver_version": files.version,
                        "path": str(self._cdi.driver_path(self._vendor)),
                        **files.found,
                    },
                )
                self._written = files
        except DriverFilesError as exc:
            self._status.report(DriverFilesState(ready=False, reason=exc.reason, message=exc.message))
            raise PrepareFailedError(
                exc.reason, f"the {self._vendor} driver's files cannot be given to containers: {exc.message}"
            ) from exc
        except (OSError, ValueError) as exc:
            self._status.report(
                DriverFilesState(ready=False, reason="DriverSpecUnwritable", message=str(exc))
            )
            raise PrepareFailedError("DriverSpecUnwritable", f"the base CDI spec: {exc}") from exc
        found = ", ".join(f"{count} {what}" for what, count in files.found.items())
        self._status.report(
            DriverFilesState(ready=True, reason=REASON_FOUND, message=f"driver {files.version}: {found}")
        )
        return driver_device_id(self._vendor)

    def withdraw(self) -> bool:
        """Removes the base spec (the plugin leaves the node for good); whether there was one."""
        self._written = None
        return remove_file(self._cdi.driver_path(self._vendor), durable=False)

    def refresh(self) -> None:
        """:meth:`device_id` for the periodic round: a failure is reported, not raised."""
        try:
            self.device_id()
        except PrepareFailedError as exc:
            logger.warning("driver files unavailable: %s", exc)


class KubeDriverFilesStatus:
    """:class:`DriverFilesStatus` on this node's PhysicalGPUs (``gpus``: the informer's store)."""

    def __init__(
        self, *, client: KubeClient, gpus: Callable[[], list[PhysicalGPU]], recorder: EventRecorderLogger
    ) -> None:
        self._client = KubeClient(client.api_client, field_manager=FIELD_MANAGER)
        self._gpus = gpus
        self._recorder = recorder
        self._state: DriverFilesState | None = None
        self._warned: set[tuple[str, str]] = set()  # (card, reason) already told by an event
        self._lock = threading.Lock()

    def report(self, state: DriverFilesState) -> None:
        with self._lock:
            changed, self._state = state != self._state, state
        if changed:
            self.sync()

    def sync(self) -> None:
        with self._lock:
            state = self._state
        if state is None:
            return
        status = "True" if state.ready else "False"
        for gpu in self._gpus():
            name = str(gpu.metadata.name)
            current = find_condition(gpu.status.conditions if gpu.status else None, CONDITION)
            if current is not None and (current.status, current.reason, current.message) == (
                status,
                state.reason,
                state.message,
            ):
                continue
            since = current.last_transition_time if current is not None and current.status == status else None
            condition = {
                "type": CONDITION,
                "status": status,
                "reason": state.reason,
                "message": state.message[:1000],
                "lastTransitionTime": normalize_time(since or now_utc()).strftime("%Y-%m-%dT%H:%M:%SZ"),
            }
            body = {"metadata": {"name": name}, "status": {"conditions": [condition]}}
            try:
                self._client.apply(PHYSICAL_GPU, body, subresource="status", force=True)
            except Exception as exc:  # the next round writes it again
                logger.warning("could not report %s on %s: %s", CONDITION, name, exc)
                continue
            if not state.ready and (name, state.reason) not in self._warned:
                self._warned.add((name, state.reason))
                self._recorder.event(
                    gpu, type_="Warning", reason=state.reason, message=state.message[:1000], kind=PHYSICAL_GPU
                )
            elif state.ready:
                self._warned = {warned for warned in self._warned if warned[0] != name}
