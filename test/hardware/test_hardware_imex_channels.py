"""What this node's NVML says about multi-node NVLink fabrics, and that a node outside one offers
no IMEX channels.

Read-only. For each card it prints the fabric reading (state, status, cluster UUID, clique, health
mask, or why there is none) and the card's NVLink domain as the backend computes it; then it asks
the same decision the publish pass makes (:func:`pkg.gpuhandler.publishing.channels.decide_channels`)
with this host's own ``/proc/devices`` and process table. A card in no fabric (an HGX board, a
PCIe card) names no clique, so the node must offer no channel whatever the driver registers.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path

from pkg.backends.nvidia.imex_host import ImexHostReader
from pkg.backends.nvidia.nvlink import nvlink_domain
from pkg.backends.nvidia.nvml_port import Nvml, if_offered
from pkg.gpuhandler.publishing.channels import decide_channels, is_fabric_domain

ReportLine = Callable[[str], None]  # the conftest's report_line


def _fabric(nvml: Nvml, address: str) -> str:
    try:
        info = nvml.gpu_fabric_info(address)
    except Exception as exc:  # NOT_SUPPORTED before Hopper, or a driver without the call
        return f"no fabric reading ({exc})"
    return (
        f"state={info.state} status={info.status} cluster={info.cluster_uuid} "
        f"clique={info.clique_id} health={info.health_mask}"
    )


def test_a_node_outside_a_fabric_offers_no_imex_channel(
    nvml: Nvml, cards: list[str], report_line: ReportLine
) -> None:
    domains = []
    for address in cards:
        domain = nvlink_domain(nvml, address, fabric=if_offered(partial(nvml.gpu_fabric_info, address)))
        domains.append(domain)
        report_line(f"{address}: {_fabric(nvml, address)}; nvlinkDomain={domain}")
    host = ImexHostReader(proc_root=Path("/proc"), processes_proc=Path("/proc"), host_root=Path("/")).read()
    report_line(f"IMEX channel major: {host.channel_major}; host service: {host.host_service}")

    decision = decide_channels(host, domains)
    report_line(f"channels offered: {decision.domain is not None} ({decision.reason})")

    if not any(is_fabric_domain(d) for d in domains):
        assert decision.domain is None, decision
        assert decision.devices(128) == []
