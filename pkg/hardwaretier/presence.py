"""Is there an NVIDIA GPU here, and may the tier use it? The hardware tier's first check.

Without a GPU every other step would fail with an error about something else (a missing device
node in a CDI spec, an NVML call); so the tier stops at once with one message and an exit code of
its own (:data:`EXIT_NO_GPU`), which a CI job can tell from a failed test. Two facts make a GPU: the
driver's control node ``/dev/nvidiactl`` exists (the kernel module is loaded) and NVML loads and
sees at least one card (the user-space driver matches it). Root is the next requirement: runc,
device cgroups and the cards' device nodes need it (:data:`EXIT_NOT_ROOT`).

The exit codes are those of sysexits.h: EX_UNAVAILABLE and EX_NOPERM.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Final

EXIT_NO_GPU: Final = 69  # EX_UNAVAILABLE
EXIT_NOT_ROOT: Final = 77  # EX_NOPERM
NO_GPU: Final = "no NVIDIA GPU (no /dev/nvidiactl / NVML cannot load)"


class NoGpuError(RuntimeError):
    """This machine has no usable NVIDIA GPU; the message says which of the two facts failed."""


class NotRootError(RuntimeError):
    """The tier needs root and does not have it."""


def nvml_card_count() -> int:
    """Loads NVML, counts the cards it sees, and shuts it down again; raises when it cannot load."""
    import pynvml  # noqa: PLC0415 - only where a GPU is looked for

    pynvml.nvmlInit()
    try:
        return int(pynvml.nvmlDeviceGetCount())
    finally:
        pynvml.nvmlShutdown()


def check_gpu(*, dev_root: Path = Path("/dev"), count_cards: Callable[[], int] = nvml_card_count) -> int:
    """The number of cards NVML sees; :class:`NoGpuError` when there is no control node, NVML
    does not load, or it sees no card."""
    control = dev_root / "nvidiactl"
    if not control.exists():
        raise NoGpuError(f"{NO_GPU}: {control} does not exist (is the nvidia kernel module loaded?)")
    try:
        count = count_cards()
    except Exception as exc:  # pynvml raises its own types, and OSError when the library is missing
        raise NoGpuError(f"{NO_GPU}: NVML cannot load: {exc}") from exc
    if count < 1:
        raise NoGpuError(f"{NO_GPU}: NVML loads but sees no card")
    return count


def check_root(euid: int | None = None) -> None:
    """:class:`NotRootError` unless the process runs as root."""
    uid = os.geteuid() if euid is None else euid
    if uid != 0:
        raise NotRootError(
            f"the hardware tier runs as root (runc, device cgroups, the cards' device nodes); euid is {uid}"
        )
