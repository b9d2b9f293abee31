"""What a PhysicalGPU reports about the hardware it stands for: the node it sits in
(``nodeInfo``), its PCI identity (``pciInfo``) and the capability snapshot (``capabilities``).

These parts describe the card, not what the driver is doing with it right now; that lives in
``physicalgpu.CurrentState``. They are kept here so ``physicalgpu.py`` stays the object and its
cross-part rules.

MIG placements. Storing them in the CRD is our choice; the offers need them: offer names carry the placement
start (``gpu-0000-02-00-0-mig-5-0``), each MIG offer consumes the memory-slice counters of its placement, and
best-fit placement chooses among placements. A placement counts *memory* slices, which differ from
``sliceCount`` (A100: the 7g profile occupies 8 memory slices), so it cannot be derived from the profile.
Storing the list that NVML reports keeps whoever builds offers from a PhysicalGPU independent of NVML. It is
optional, so objects written without it stay valid.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, model_validator

from api.gpu.v1alpha1.common import ApiModel, Int32, Int64, Vendor, cel_rules

_HEX4 = r"^[0-9a-f]{4}$"
# Bounds on what a node writes from its host and its cards (os-release(5) identifiers, uname(2)'s
# 64 characters, NVML's string buffers), so a damaged source is refused by the API server instead
# of filling the status; the readers check the same bounds before writing (pkg.hardware).
MAX_OS_ID = 63
MAX_TEXT = 256
_ComputeType = Annotated[str, Field(max_length=32)]
_PartitionMode = Annotated[str, Field(max_length=16, pattern=r"^[a-z0-9]+$")]


class OSInfo(ApiModel):
    id: str | None = Field(
        default=None, max_length=MAX_OS_ID, description="Operating system ID from /etc/os-release (ID)."
    )
    version: str | None = Field(
        default=None,
        max_length=MAX_OS_ID,
        description="Operating system version from /etc/os-release (VERSION_ID).",
    )
    name: str | None = Field(
        default=None, max_length=MAX_TEXT, description="Operating system name from /etc/os-release (NAME)."
    )


class NodeInfo(ApiModel):
    node_name: str | None = Field(
        default=None, max_length=253, description="Name of the node the GPU is installed in."
    )
    os: OSInfo | None = Field(default=None, description="Operating system of the node.")
    kernel_release: str | None = Field(
        default=None,
        max_length=64,
        description="Kernel release of the node (/proc/sys/kernel/osrelease, as `uname -r`).",
    )
    bare_metal: bool | None = Field(
        default=None,
        description=(
            "Whether the node is bare metal: true only on positive evidence (DMI names a machine and no "
            "hypervisor, and the CPU flags lack 'hypervisor'); anything unknown counts as a VM."
        ),
    )


class PciClass(ApiModel):
    code: str = Field(pattern=_HEX4, description='PCI class and subclass code in hex, e.g. "0302".')
    name: str | None = Field(
        default=None, max_length=MAX_TEXT, description='Class name from pci.ids, e.g. "3D controller".'
    )


class PciId(ApiModel):
    id: str = Field(pattern=_HEX4, description='PCI ID in lower-case hex, e.g. "10de".')
    name: str | None = Field(
        default=None, max_length=MAX_TEXT, description="Name from pci.ids; absent when pci.ids has none."
    )


class PciInfo(ApiModel):
    address: str = Field(
        pattern=r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$",
        description='PCI address (domain:bus:device.function), e.g. "0000:02:00.0".',
    )
    class_: PciClass = Field(alias="class", description="PCI device class.")
    vendor: PciId = Field(description="PCI vendor.")
    device: PciId = Field(description="PCI device.")


class MigPlacement(ApiModel):
    start: Int32 = Field(ge=0, description="Index of the first memory slice the instance occupies.")
    size: Int32 = Field(ge=1, description="Number of memory slices the instance occupies.")


class MigProfile(ApiModel):
    profile_id: Int32 = Field(
        alias="profileID", ge=0, description="NVML GPU instance profile ID (as in `nvidia-smi mig -lgip`)."
    )
    name: str = Field(min_length=1, max_length=64, description='Profile name, e.g. "2g.12gb".')
    memory_mib: Int64 = Field(alias="memoryMiB", ge=0, description="Memory of one instance in MiB.")
    slice_count: Int32 = Field(ge=1, description="Number of GPU (compute) slices of one instance.")
    max_instances: Int32 = Field(ge=0, description="Maximum number of instances of this profile on the card.")
    placements: list[MigPlacement] | None = Field(
        default=None,
        max_length=64,
        description=(
            "Possible placements of an instance, in memory slices, as NVML reports them. "
            "Offers and the memory-slice counters they consume are derived from them."
        ),
    )


class NvidiaMigCapabilities(ApiModel):
    total_slices: Int32 = Field(
        ge=1, description="Number of GPU (compute) slices of the card, e.g. 4 on A30 and 7 on A100."
    )
    profiles: list[MigProfile] = Field(
        max_length=64, description="Every GPU instance profile the card supports."
    )


class NvidiaCapabilities(ApiModel):
    model_config = cel_rules(
        ("self.migSupported || !has(self.mig)", "mig must be absent when migSupported is false"),
    )

    compute_cap: str | None = Field(
        default=None,
        max_length=16,
        pattern=r"^\d+\.\d+$",
        description='CUDA compute capability, e.g. "8.0".',
    )
    product_architecture: str | None = Field(
        default=None, max_length=64, description='GPU architecture, e.g. "Ampere".'
    )
    board_part_number: str | None = Field(
        default=None, max_length=80, description="Board part number (NVML's buffer holds 80)."
    )
    compute_types: list[_ComputeType] | None = Field(
        default=None,
        max_length=32,
        description="Supported compute data types, e.g. FP32, FP64, FP16, BF16, TF32, INT8.",
    )
    power_limit_min_w: Int32 | None = Field(
        default=None, alias="powerLimitMinW", ge=0, description="Minimum settable power limit in watts."
    )
    power_limit_max_w: Int32 | None = Field(
        default=None, alias="powerLimitMaxW", ge=0, description="Maximum settable power limit in watts."
    )
    mig_supported: bool = Field(description="Whether the card supports MIG.")
    mig: NvidiaMigCapabilities | None = Field(
        default=None, description="MIG geometry of the card; present only when migSupported is true."
    )

    @model_validator(mode="after")
    def _mig_only_when_supported(self) -> NvidiaCapabilities:
        if not self.mig_supported and self.mig is not None:
            raise ValueError("capabilities.nvidia.mig must be absent when migSupported is false")
        return self


class AmdCapabilities(ApiModel):
    """The partition modes an AMD card lists in sysfs (``available_compute_partition``,
    ``available_memory_partition``), lower case as the offers name them; a mode the card does not
    list cannot be switched to. Absent where the card has no partitioning (MI210)."""

    compute_partition_modes: list[_PartitionMode] | None = Field(
        default=None, max_length=16, description='Compute partition modes, e.g. "spx", "dpx", "qpx", "cpx".'
    )
    memory_partition_modes: list[_PartitionMode] | None = Field(
        default=None, max_length=16, description='Memory partition (NPS) modes, e.g. "nps1", "nps4".'
    )


class Capabilities(ApiModel):
    model_config = cel_rules(
        ("self.vendor == 'Nvidia' || !has(self.nvidia)", "nvidia is allowed only when vendor is Nvidia"),
        ("self.vendor == 'Amd' || !has(self.amd)", "amd is allowed only when vendor is Amd"),
    )

    product_name: str | None = Field(
        default=None, max_length=96, description='Product name, e.g. "NVIDIA A30" (NVML\'s buffer holds 96).'
    )
    memory_mib: Int64 | None = Field(
        default=None, alias="memoryMiB", ge=0, description="Total memory of the card in MiB."
    )
    vendor: Vendor = Field(description="GPU vendor.")
    nvidia: NvidiaCapabilities | None = Field(
        default=None, description="NVIDIA-specific capabilities; present only when vendor is Nvidia."
    )
    amd: AmdCapabilities | None = Field(
        default=None, description="AMD-specific capabilities; present only when vendor is Amd."
    )

    @model_validator(mode="after")
    def _nvidia_only_for_nvidia(self) -> Capabilities:
        if self.nvidia is not None and self.vendor is not Vendor.NVIDIA:
            raise ValueError(
                f"capabilities.nvidia is allowed only when capabilities.vendor is Nvidia, "
                f"not {self.vendor.value}"
            )
        if self.amd is not None and self.vendor is not Vendor.AMD:
            raise ValueError(
                f"capabilities.amd is allowed only when capabilities.vendor is Amd, not {self.vendor.value}"
            )
        return self
