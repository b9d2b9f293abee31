"""A card's multi-node NVLink fabric as our domain acts on it, from NVML's fabric info.

NVML answers in its own terms: a registration state (not supported, not started, in progress,
completed), a return code for how the registration ended, the cluster UUID and clique ID, and a
health mask of two-bit fields. What the node does with a card needs fewer, plainer facts:

* **not in a fabric** (``None``): the state is not supported and no cluster UUID is reported —
  every card before Hopper, and a card in a VM or on a board without a fabric. Nothing is
  published about it and nothing is tainted; the real H200 of our hardware tier is such a card;
* **Joining**: registration not started or in progress. NVLink peers across nodes are not
  reachable yet (on an NVSwitch board CUDA does not even start), so the card must not be
  allocated to a job that counts on them;
* **Failed**: registration completed with an error, or NVML reports a cluster but no state;
* **Degraded**: registered, and the health mask reports a fault (bandwidth degraded, a route
  being recovered or unhealthy, an access timeout being recovered, an incorrect configuration);
* **Ready**: registered without fault.

The fields of the health mask are read as NVML defines them (``NVML_GPU_FABRIC_HEALTH_MASK_*``):
only a field that says TRUE (or, for the configuration, names a fault) is a fault; NOT_SUPPORTED
and FALSE are not, so an older driver that fills no mask never makes a card Degraded.

The reasons name what to look at, and become the value of the device taint
(docs/topology.md#multi-node-nvlink-fabric), so each is a label value.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from api.gpu.v1alpha1 import FabricState
from pkg.backends.nvidia.nvml_port import (
    GPU_FABRIC_CONFIGURATION_GPU_STATE_INVALID,
    GPU_FABRIC_CONFIGURATION_INCOMPATIBLE_GPU_FW,
    GPU_FABRIC_CONFIGURATION_INCORRECT_CHASSIS_SN,
    GPU_FABRIC_CONFIGURATION_INCORRECT_SYSGUID,
    GPU_FABRIC_CONFIGURATION_INSUFFICIENT_NVLINKS,
    GPU_FABRIC_CONFIGURATION_INVALID_LOCATION,
    GPU_FABRIC_CONFIGURATION_NO_PARTITION,
    GPU_FABRIC_HEALTH_SHIFT_ACCESS_TIMEOUT_RECOVERY,
    GPU_FABRIC_HEALTH_SHIFT_DEGRADED_BW,
    GPU_FABRIC_HEALTH_SHIFT_INCORRECT_CONFIGURATION,
    GPU_FABRIC_HEALTH_SHIFT_ROUTE_RECOVERY,
    GPU_FABRIC_HEALTH_SHIFT_ROUTE_UNHEALTHY,
    GPU_FABRIC_HEALTH_TRUE,
    GPU_FABRIC_HEALTH_WIDTH_FLAG,
    GPU_FABRIC_HEALTH_WIDTH_INCORRECT_CONFIGURATION,
    GPU_FABRIC_STATE_COMPLETED,
    GPU_FABRIC_STATE_IN_PROGRESS,
    GPU_FABRIC_STATE_NOT_STARTED,
    GPU_FABRIC_STATE_NOT_SUPPORTED,
    NO_FABRIC_CLUSTER,
    GpuFabricInfo,
    return_reason,
)

_SUCCESS: Final = 0
REASON_NOT_STARTED: Final = "RegistrationNotStarted"
REASON_IN_PROGRESS: Final = "RegistrationInProgress"
REASON_FAILED: Final = "RegistrationFailed"  # followed by NVML's error, e.g. RegistrationFailedTimeout
REASON_NO_STATE: Final = "RegistrationStateNotSupported"  # a cluster UUID without a state

# The yes/no fields of the health mask: (reason, shift).
HEALTH_FLAGS: Final = (
    ("DegradedBandwidth", GPU_FABRIC_HEALTH_SHIFT_DEGRADED_BW),
    ("RouteRecovery", GPU_FABRIC_HEALTH_SHIFT_ROUTE_RECOVERY),
    ("RouteUnhealthy", GPU_FABRIC_HEALTH_SHIFT_ROUTE_UNHEALTHY),
    ("AccessTimeoutRecovery", GPU_FABRIC_HEALTH_SHIFT_ACCESS_TIMEOUT_RECOVERY),
)
# The configuration field's faults (its other values: not supported, none).
CONFIGURATION_FAULTS: Final = {
    GPU_FABRIC_CONFIGURATION_INCORRECT_SYSGUID: "ConfigurationIncorrectSystemGuid",
    GPU_FABRIC_CONFIGURATION_INCORRECT_CHASSIS_SN: "ConfigurationIncorrectChassisSerial",
    GPU_FABRIC_CONFIGURATION_NO_PARTITION: "ConfigurationNoPartition",
    GPU_FABRIC_CONFIGURATION_INSUFFICIENT_NVLINKS: "ConfigurationInsufficientNvlinks",
    GPU_FABRIC_CONFIGURATION_INCOMPATIBLE_GPU_FW: "ConfigurationIncompatibleGpuFirmware",
    GPU_FABRIC_CONFIGURATION_INVALID_LOCATION: "ConfigurationInvalidLocation",
    GPU_FABRIC_CONFIGURATION_GPU_STATE_INVALID: "ConfigurationGpuStateInvalid",
}


@dataclass(frozen=True, kw_only=True)
class FabricFacts:
    """A card of a fabric: its state, the fabric's cluster UUID (``None`` when NVML reports all
    zeros) and clique, and why the state is not Ready (empty when it is)."""

    state: FabricState
    cluster_uuid: str | None
    clique_id: int
    reasons: tuple[str, ...] = ()


def fabric_facts(info: GpuFabricInfo | None) -> FabricFacts | None:
    """The card's fabric facts; ``None`` when it is in no fabric (or NVML does not offer the query)."""
    if info is None:
        return None
    cluster = info.cluster_uuid if info.cluster_uuid != NO_FABRIC_CLUSTER else None
    if info.state == GPU_FABRIC_STATE_NOT_SUPPORTED and cluster is None:
        return None

    def facts(state: FabricState, *reasons: str) -> FabricFacts:
        return FabricFacts(state=state, cluster_uuid=cluster, clique_id=info.clique_id, reasons=reasons)

    if info.state == GPU_FABRIC_STATE_NOT_STARTED:
        return facts(FabricState.JOINING, REASON_NOT_STARTED)
    if info.state == GPU_FABRIC_STATE_IN_PROGRESS:
        return facts(FabricState.JOINING, REASON_IN_PROGRESS)
    if info.state != GPU_FABRIC_STATE_COMPLETED:
        return facts(FabricState.FAILED, REASON_NO_STATE)
    if info.status != _SUCCESS:
        return facts(FabricState.FAILED, REASON_FAILED + return_reason(info.status).removeprefix("Nvml"))
    faults = health_faults(info.health_mask)
    return facts(FabricState.DEGRADED, *faults) if faults else facts(FabricState.READY)


def health_faults(mask: int | None) -> tuple[str, ...]:
    """The faults the health mask reports, in NVML's field order; none for ``None`` (no mask)."""
    if mask is None:
        return ()
    faults = [
        reason
        for reason, shift in HEALTH_FLAGS
        if (mask >> shift) & GPU_FABRIC_HEALTH_WIDTH_FLAG == GPU_FABRIC_HEALTH_TRUE
    ]
    configuration = (
        mask >> GPU_FABRIC_HEALTH_SHIFT_INCORRECT_CONFIGURATION
    ) & GPU_FABRIC_HEALTH_WIDTH_INCORRECT_CONFIGURATION
    if configuration in CONFIGURATION_FAULTS:
        faults.append(CONFIGURATION_FAULTS[configuration])
    return tuple(faults)
