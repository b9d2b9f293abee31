"""Turning hardware names into Kubernetes label values (PhysicalGPU labels, the node agent's host labels).

Names from pci.ids, NVML, os-release and the kernel land in labels such as
``gpu.deckhouse.io/device: a30-pcie`` and ``gpu.deckhouse.io/kernel.version``. A label value is at
most 63 characters of ``[A-Za-z0-9._-]`` that start and end alphanumeric; the API server rejects
anything else, so a single odd name would otherwise block the whole object's write.

Two properties matter more than prettiness:

- *Deterministic*: the same input always gives the same value, so a re-sync never flaps a label
  and selectors written by people keep matching.
- *Collision-resistant when shortened*: a value over 63 characters keeps a prefix and ends in
  ``-`` plus 8 hex digits of the SHA-256 of the whole normalised value, so two long names that
  share a prefix still get different labels.

:func:`normalize_device_model` makes the ``device`` label: it prefers the marketing name that
pci.ids puts in brackets (``"GA100GL [A30 PCIe]"`` → ``"a30-pcie"``) and drops the vendor word
NVML puts first (``"NVIDIA A30"`` → ``"a30"``), so both sources give the same label where they
spell the model the same way.
"""

from __future__ import annotations

import hashlib
import re

MAX_LABEL_VALUE_LENGTH = 63

_INVALID_RUN = re.compile(r"[^a-z0-9._-]+")
_DASH_RUN = re.compile(r"-{2,}")
_NOT_ALNUM_RUN = re.compile(r"[^a-z0-9]+")
_EDGE = "-_."
_HASH_LENGTH = 8
# pci.ids puts the marketing name in brackets after the chip name: "GH100 [H100 SXM5 80GB]".
_BRACKETED = re.compile(r"\[([^\[\]]*[A-Za-z0-9][^\[\]]*)\]")
_VENDOR_PREFIX = re.compile(r"^(nvidia|amd|intel)(\s+corporation)?\s+", re.IGNORECASE)


def to_label_value(text: str) -> str:
    """A valid label value for ``text``: lower-case, invalid characters as ``-``, at most 63.

    ``"Ubuntu 22.04 LTS"`` → ``"ubuntu-22.04-lts"``; a text without letters or digits gives ``""``
    (a valid, empty label value).
    """
    value = _DASH_RUN.sub("-", _INVALID_RUN.sub("-", text.lower())).strip(_EDGE)
    if len(value) <= MAX_LABEL_VALUE_LENGTH:
        return value
    digest = hashlib.sha256(value.encode()).hexdigest()[:_HASH_LENGTH]
    prefix = value[: MAX_LABEL_VALUE_LENGTH - _HASH_LENGTH - 1].rstrip(_EDGE)
    return f"{prefix}-{digest}"


def normalize_device_model(product_or_pci_name: str) -> str:
    """The ``device`` label for a pci.ids device name or an NVML product name.

    ``"GA100 [A100 SXM4 80GB]"`` → ``"a100-sxm4-80gb"``, ``"AD104GL [L4]"`` → ``"l4"``,
    ``"NVIDIA A100-SXM4-80GB"`` → ``"a100-sxm4-80gb"``. Every run of other characters becomes one
    ``-``, dots included, so the result is also a valid DNS label fragment.
    """
    bracketed = _BRACKETED.findall(product_or_pci_name)
    name = bracketed[-1] if bracketed else product_or_pci_name
    name = _VENDOR_PREFIX.sub("", name.strip())
    return to_label_value(_NOT_ALNUM_RUN.sub("-", name.lower()))
