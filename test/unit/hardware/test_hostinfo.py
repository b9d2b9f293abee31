"""Host info: os-release parsing, kernel release, and bare metal only on positive evidence."""

from __future__ import annotations

from pathlib import Path

import pytest
from testutil.unit.hardware.host_readings import classify_dmi, read_host_info

from pkg.hardware.hostinfo import HostInfo, parse_os_release


def _read(root: Path) -> HostInfo:
    return read_host_info(
        os_release=root / "etc" / "os-release",
        kernel_osrelease=root / "proc" / "sys" / "kernel" / "osrelease",
        dmi_dir=root / "class" / "dmi" / "id",
        cpuinfo=root / "proc" / "cpuinfo",
    )


def _dmi(root: Path, sys_vendor: str, product_name: str) -> Path:
    dmi = root / "dmi"
    dmi.mkdir()
    (dmi / "sys_vendor").write_text(sys_vendor + "\n")
    (dmi / "product_name").write_text(product_name + "\n")
    return dmi


def test_reads_a_fixture_host(sysfs_fixtures: Path) -> None:
    info = _read(sysfs_fixtures / "a30-x2")

    assert info == HostInfo(
        os_id="ubuntu",
        os_version="22.04",
        os_name="Ubuntu",
        kernel_release="5.15.0-105-generic",
        bare_metal=True,
        bare_metal_reason=(
            "no hypervisor: DMI names 'Supermicro' / 'SYS-4029GP-TRT' and the CPU flags have no 'hypervisor'"
        ),
    )


def test_fixture_vm_is_not_bare_metal(sysfs_fixtures: Path) -> None:
    info = _read(sysfs_fixtures / "vm-dmi")

    assert info.bare_metal is False
    assert "QEMU" in info.bare_metal_reason


def test_missing_sources_leave_fields_empty_and_count_as_vm(tmp_path: Path) -> None:
    info = _read(tmp_path)

    assert (info.os_id, info.os_version, info.os_name, info.kernel_release) == (None, None, None, None)
    assert info.bare_metal is False
    assert "counted as a VM" in info.bare_metal_reason
    assert info.failed == ()  # absent, not failed


def test_os_release_quoting_escapes_and_comments() -> None:
    text = "\n".join(
        [
            "# comment=ignored",
            "",
            'NAME="Red Hat Enterprise Linux"',
            "ID=rhel",
            "ID_LIKE='fedora centos'",
            'VERSION_ID="9.4"',
            r'PRETTY_NAME="Say \"hi\" \$HOME \`x\` \\ \n"',
            r"LITERAL='no \"escapes\" here'",
            r"UNQUOTED=plain\ word",
            'EMPTY=""',
            "  INDENTED=yes  ",
            'BROKEN="no closing quote',
            "not an assignment",
            "bad key=value",
        ]
    )

    assert parse_os_release(text) == {
        "NAME": "Red Hat Enterprise Linux",
        "ID": "rhel",
        "ID_LIKE": "fedora centos",
        "VERSION_ID": "9.4",
        "PRETTY_NAME": 'Say "hi" $HOME `x` \\ \\n',
        "LITERAL": 'no \\"escapes\\" here',
        "UNQUOTED": "plain word",
        "INDENTED": "yes",
        "BROKEN": "no closing quote",
    }


def test_kernel_release_is_stripped(tmp_path: Path) -> None:
    kernel = tmp_path / "osrelease"
    kernel.write_text("6.8.0-45-generic\n")

    info = read_host_info(
        os_release=tmp_path / "none", kernel_osrelease=kernel, dmi_dir=tmp_path, cpuinfo=tmp_path / "none"
    )

    assert info.kernel_release == "6.8.0-45-generic"


@pytest.mark.parametrize(
    ("sys_vendor", "product_name"),
    [
        ("QEMU", "Standard PC (i440FX + PIIX, 1996)"),
        ("Acme", "Standard PC (Q35 + ICH9, 2009)"),
        ("Red Hat", "KVM"),
        ("VMware, Inc.", "VMware Virtual Platform"),
        ("VMware, Inc.", "VMware20,1"),
        ("innotek GmbH", "VirtualBox"),
        ("Xen", "HVM domU"),
        ("Microsoft Corporation", "Virtual Machine"),
        ("Amazon EC2", "m5.large"),
        ("Amazon EC2", "p4d.24xlarge"),
        ("Google", "Google Compute Engine"),
        ("OpenStack Foundation", "OpenStack Nova"),
        ("Parallels Software International Inc.", "Parallels Virtual Platform"),
        ("FreeBSD", "BHYVE"),
        ("Bochs", "Bochs"),
        ("Cloud Hypervisor", "cloud-hypervisor"),
        ("qemu", "standard pc"),
    ],
)
def test_hypervisor_markers_mean_vm(sys_vendor: str, product_name: str) -> None:
    bare_metal, reason = classify_dmi(sys_vendor=sys_vendor, product_name=product_name)

    assert bare_metal is False
    assert "hypervisor" in reason


@pytest.mark.parametrize(
    ("sys_vendor", "product_name"),
    [
        ("Supermicro", "SYS-4029GP-TRT"),
        ("Dell Inc.", "PowerEdge R760"),
        ("HPE", "ProLiant DL380 Gen10"),
        ("Lenovo", "ThinkSystem SR650 V3"),
        ("Intel Corporation", "Xeon Platinum Development Platform"),  # "Xeon" is not "Xen"
        ("Microsoft Corporation", "Surface Pro 9"),  # Microsoft hardware, not Hyper-V
        ("To Be Filled By O.E.M.", "To Be Filled By O.E.M."),
        ("Amazon EC2", "m5.metal"),
        ("Amazon EC2", "c7i.metal-48xl"),
        ("Amazon EC2", "I3.METAL"),
    ],
)
def test_physical_machines_are_bare_metal(sys_vendor: str, product_name: str) -> None:
    bare_metal, _ = classify_dmi(sys_vendor=sys_vendor, product_name=product_name)

    assert bare_metal is True


def test_metal_suffix_counts_only_on_ec2() -> None:
    assert classify_dmi(sys_vendor="QEMU", product_name="x.metal")[0] is False


@pytest.mark.parametrize(
    ("sys_vendor", "product_name"),
    [(None, None), ("Supermicro", None), (None, "SYS-4029GP-TRT"), ("", "")],
)
def test_unreadable_or_blank_dmi_counts_as_vm(sys_vendor: str | None, product_name: str | None) -> None:
    bare_metal, reason = classify_dmi(sys_vendor=sys_vendor, product_name=product_name)

    assert bare_metal is False
    assert "counted as a VM" in reason


def test_dmi_file_that_cannot_be_read_counts_as_vm(tmp_path: Path) -> None:
    dmi = _dmi(tmp_path, "Supermicro", "SYS-4029GP-TRT")
    (dmi / "product_name").unlink()
    (dmi / "product_name").mkdir()  # reading it fails with IsADirectoryError

    info = read_host_info(
        os_release=tmp_path / "x", kernel_osrelease=tmp_path / "y", dmi_dir=dmi, cpuinfo=tmp_path / "z"
    )

    assert info.bare_metal is False
    assert info.failed_sources() == {"dmi"}
