"""The README's walkthrough: the sample Pods of ``config/samples`` a newcomer applies to the demo.

One list, read by the demo (what it tells the user to try) and by the e2e test that runs the
walkthrough on real nodes (``test/e2e/test_demo_walkthrough.py``), so the two cannot drift apart:
each runnable sample with a line its log shows once the container got its device, and the one
that cannot be satisfied. The VM samples (VFIO passthrough, a vGPU) run on the demo's VM host,
gpu-node-c: bare metal, with two T4s under NVIDIA's vGPU manager, the only cards the VM classes
select and cards the container classes leave out, so the container samples never take them. The
AMD sample is not here: the demo has no AMD node.

The order is part of the walkthrough. The four container samples need the demo's four container
cards between them, one each (a whole card and a share take every counter of their card, and a card
holding a MIG device can be nothing else), and only the A30s and the H100 can cut a MIG device: the
L4 cannot. Applied all at once, the scheduler may give the A30s and the H100 to the whole-card and
shared Pods, and the MIG Pod waits for a card that never frees. So the walkthrough applies
:data:`SCHEDULED_FIRST`, waits until the scheduler placed it, and then applies the rest, which take
the three cards left whichever way the scheduler deals them out (each can run on any of them). The
VM samples have the VM host's two T4s, one each, in either order.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

SAMPLES_DIR = Path(__file__).resolve().parents[2] / "config" / "samples"
# The demo's nodes and their fixture hosts (test/fixtures/sysfs): what the samples run on.
DEMO_NODES = {"gpu-node-a": "a30-x2", "gpu-node-b": "h100-and-l4", "gpu-node-c": "t4-vgpu"}


@dataclass(frozen=True)
class SamplePod:
    """A file of ``config/samples``, the Pod it makes, and a line of that Pod's log that proves it
    got its device (empty for a Pod that is not meant to run)."""

    file: str
    pod: str
    shows: str = ""

    @property
    def path(self) -> Path:
        return SAMPLES_DIR / self.file


# The sample with the fewest cards to choose from: applied first, and scheduled before the rest.
SCHEDULED_FIRST = SamplePod("pod-mig-1g.yaml", "mig-1g-demo", shows="NVIDIA_VISIBLE_DEVICES=MIG-")
RUNNABLE = (
    SCHEDULED_FIRST,
    SamplePod("pod-whole-card.yaml", "whole-card-demo", shows="NVIDIA_VISIBLE_DEVICES=GPU-"),
    SamplePod("pod-timeslicing.yaml", "timeslicing-demo", shows="NVIDIA_VISIBLE_DEVICES=GPU-"),
    SamplePod("pod-mps.yaml", "mps-demo", shows="THREADS=30"),
    # The device metadata KubeVirt reads: the passed-through card's PCI address, the vGPU's mdev.
    SamplePod("pod-vfio.yaml", "vm-vfio-demo", shows='"resource.kubernetes.io/pciBusID"'),
    SamplePod("pod-vgpu.yaml", "vm-vgpu-demo", shows='"mdevUUID"'),
)
# The kubectl arguments that wait for SCHEDULED_FIRST to be placed (its claim allocated, the Pod
# bound to a node), before the rest of the walkthrough is applied.
WAIT_SCHEDULED_FIRST = (
    "wait",
    "--for=condition=PodScheduled",
    "--timeout=120s",
    f"pod/{SCHEDULED_FIRST.pod}",
)
UNSATISFIABLE = SamplePod("pod-wants-three-whole.yaml", "wants-three-whole")
# What UNSATISFIABLE asks: more whole cards for containers than any of DEMO_NODES has (the VM
# host's cards are not for containers).
ASKED_WHOLE_CARDS = 3
