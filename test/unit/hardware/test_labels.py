"""Label values: normalisation, deterministic shortening, validity, and device-model names."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pkg.hardware.labels import (
    MAX_LABEL_VALUE_LENGTH,
    normalize_device_model,
    to_label_value,
)
from pkg.hardware.pci import scan_pci
from pkg.hardware.pciids import PciIds

# The Kubernetes label-value rule (k8s.io/apimachinery validation.IsValidLabelValue).
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
DNS_LABEL = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?)?$")

AWKWARD_TEXTS = [
    "",
    "-",
    "...",
    "___x___",
    "NVIDIA A30",
    "GA100GL [A30 PCIe]",
    "Ubuntu 22.04.4 LTS",
    "5.14.0-427.13.1.el9_4.x86_64",
    "  spaces  around  ",
    "Größe/µ-Prozessor ™",
    "a" * 63,
    "a" * 64,
    "x" * 53 + "-" * 20 + "y" * 20,
    "é" * 100,
    "-" + "b" * 200 + "-",
]


def _valid(value: str) -> bool:
    return len(value) <= MAX_LABEL_VALUE_LENGTH and LABEL_VALUE.fullmatch(value) is not None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("NVIDIA", "nvidia"),
        ("Ubuntu 22.04 LTS", "ubuntu-22.04-lts"),
        ("5.15.0-105-generic", "5.15.0-105-generic"),
        ("el9_4.x86_64", "el9_4.x86_64"),
        ("a  /  b", "a-b"),
        ("a--b", "a-b"),
        ("--a--", "a"),
        (".hidden_", "hidden"),
        ("™", ""),
        ("", ""),
    ],
)
def test_to_label_value(text: str, expected: str) -> None:
    assert to_label_value(text) == expected


@pytest.mark.parametrize("text", AWKWARD_TEXTS)
def test_every_result_is_a_valid_label_value(text: str) -> None:
    assert _valid(to_label_value(text))
    assert _valid(normalize_device_model(text))
    assert DNS_LABEL.match(normalize_device_model(text))


def test_value_of_exactly_63_characters_is_kept() -> None:
    assert to_label_value("a" * 63) == "a" * 63


def test_long_values_are_shortened_deterministically_with_a_hash() -> None:
    long_text = "Very Long Product Name " * 5

    value = to_label_value(long_text)

    assert value == to_label_value(long_text)
    assert len(value) <= MAX_LABEL_VALUE_LENGTH
    assert re.fullmatch(r"very-long-product-name-.*-[0-9a-f]{8}", value)


def test_long_values_sharing_a_prefix_do_not_collide() -> None:
    first, second = to_label_value("p" * 80 + "one"), to_label_value("p" * 80 + "two")

    assert first != second
    assert first[:-8] == second[:-8]


def test_shortened_prefix_never_ends_in_a_separator() -> None:
    value = to_label_value("x" * 53 + "." + "y" * 30)

    assert re.fullmatch(r"x{53}-[0-9a-f]{8}", value)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("GA100GL [A30 PCIe]", "a30-pcie"),
        ("GA100 [A100 SXM4 80GB]", "a100-sxm4-80gb"),
        ("GH100 [H100 SXM5 80GB]", "h100-sxm5-80gb"),
        ("GH100[H100 SXM5 80GB]", "h100-sxm5-80gb"),  # as older pci.ids spell it
        ("AD104GL [L4]", "l4"),
        ("GA102GL [RTX A6000]", "rtx-a6000"),
        ("TU104GL [Tesla T4]", "tesla-t4"),
        ("NVIDIA A30", "a30"),
        ("NVIDIA A100-SXM4-80GB", "a100-sxm4-80gb"),
        ("NVIDIA H100 80GB HBM3", "h100-80gb-hbm3"),
        ("NVIDIA L4", "l4"),
        ("NVIDIA RTX A6000", "rtx-a6000"),
        ("NVIDIA Corporation GA100GL [A30 PCIe]", "a30-pcie"),
        ("GA102 High Definition Audio Controller", "ga102-high-definition-audio-controller"),
        ("GH100", "gh100"),
        ("GH100 [ ]", "gh100"),
        ("NVIDIA", "nvidia"),
        ("", ""),
    ],
)
def test_normalize_device_model(name: str, expected: str) -> None:
    assert normalize_device_model(name) == expected


def test_device_labels_of_every_fixture_gpu_from_pci_ids(sysfs_fixtures: Path, pci_ids_excerpt: Path) -> None:
    ids = PciIds.load(pci_ids_excerpt)
    labels = {
        (device.vendor_id, device.device_id): normalize_device_model(name)
        for scenario in sysfs_fixtures.iterdir()
        if scenario.is_dir() and (scenario / "bus").is_dir()
        for device in scan_pci(scenario).devices
        if device.class_code in ("0300", "0302")
        and (name := ids.device_name(device.vendor_id, device.device_id)) is not None
    }

    assert labels == {
        ("10de", "20b7"): "a30-pcie",
        ("10de", "20b2"): "a100-sxm4-80gb",
        ("10de", "2330"): "h100-sxm5-80gb",
        ("10de", "27b8"): "l4",
        ("10de", "1eb8"): "tesla-t4",
        ("10de", "2230"): "rtx-a6000",
    }
