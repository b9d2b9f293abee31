"""A CUDA process in a container is attributed to that container's cgroup from the real NVML's
process list — what gpu-handler's per-Pod attribution does on a node (docs/who-uses-our-gpus.md).

The CUDA program holds its context for a while (``cuda_ok HOLD_SECONDS``) in a runc container
given only our CDI specs; while it runs, the backend's usage read lists its PID with the GPU memory
it holds, ``/proc/<pid>/cgroup`` leads to the container's own cgroup, and an attribution pass with
no Pod to match reports the process as unattributed on the card — never dropped.
"""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

from pkg.backends import VendorBackend
from pkg.backends.usage import ProcessUsage
from pkg.gpuhandler.attribution.sampler import UNATTRIBUTED, Sampler, UsageRow
from pkg.hardware.cgroups import ProcessCgroup, read_cgroup
from pkg.hardwaretier.claims import PreparationNode, PreparedClaim
from pkg.hardwaretier.container import cdi_bundle
from pkg.hardwaretier.nvml_facts import CardFacts
from pkg.hardwaretier.runc import start_container

HOLD_SECONDS = 30
PROC = Path("/proc")


def test_a_cuda_process_in_a_container_is_attributed_to_the_containers_cgroup(
    whole_claim: PreparedClaim,
    preparation: PreparationNode,
    preparing_backend: VendorBackend,
    runc: Path,
    cdi_tool: Path,
    cuda_program: Path,
    workdir: Path,
    facts: dict[str, CardFacts],
    card: str,
) -> None:
    container_id = f"attribution-{uuid.uuid4().hex[:8]}"
    bundle = cdi_bundle(
        runc=runc,
        cdi_tool=cdi_tool,
        bundle=workdir / "bundles" / container_id,
        container_id=container_id,
        program=cuda_program,
        args=[str(HOLD_SECONDS)],
        spec_dirs=[preparation.cdi_dir],
        devices=whole_claim.cdi_device_ids,
    )
    running = start_container(
        runc, bundle=bundle.path, container_id=container_id, state_root=workdir / "runc"
    )
    found: tuple[ProcessUsage, ProcessCgroup] | None = None
    rows: tuple[UsageRow, ...] = ()
    try:
        deadline = time.monotonic() + HOLD_SECONDS
        while found is None and running.running() and time.monotonic() < deadline:
            for process in preparing_backend.usage(card).processes:
                cgroup = read_cgroup(PROC, process.pid)
                if cgroup is not None and cgroup.path.endswith(bundle.cgroups_path):
                    found = (process, cgroup)
            if found is None:
                time.sleep(0.5)
        if found is not None:
            sampler = Sampler(
                read_usage=preparing_backend.usage,
                cards=lambda: {card: "hardware-tier-card"},
                prepared=list,
                pods=list,
                cgroup=lambda pid: read_cgroup(PROC, pid),
                now=lambda: datetime.now(UTC),
            )
            rows = sampler.sample().rows
    finally:
        run = running.wait(timeout=HOLD_SECONDS + 60)

    assert run.returncode == 0, run.describe()
    assert found is not None, f"NVML listed no process in cgroup {bundle.cgroups_path} while it ran"
    process, cgroup = found
    print(
        f"ATTRIBUTED pid={process.pid} cgroup={cgroup.path} device={process.device_uuid} "
        f"memory_bytes={process.memory_bytes} sm_percent={process.sm_percent}"
    )
    assert process.device_uuid == facts[card].uuid
    assert process.memory_bytes is not None
    assert process.memory_bytes > 0
    assert cgroup.container_id is None
    assert cgroup.pod_uid is None
    [row] = [r for r in rows if r.key.uuid == facts[card].uuid and r.key.attribution == UNATTRIBUTED]
    print(f"ROW {row}")
    assert row.key.pod == ""
    assert row.key.physicalgpu == "hardware-tier-card"
    assert row.processes >= 1
    assert (row.memory_bytes or 0) >= process.memory_bytes
