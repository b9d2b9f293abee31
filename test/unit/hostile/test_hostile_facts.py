"""Family 6: no lost facts — a failed read keeps the last known host facts and never removes a label.

A generated sequence of host states — each source (os-release, kernel release, DMI, CPU flags)
good in one of two ways, absent, or broken (a NUL byte, 100 KB of text, a FIFO, a directory) — is
read by one :class:`~pkg.inventory.host_info.FileHostInfoReader`, as the node agent reads it sync
after sync. A model says what each read must report: a broken source keeps the value the last
readable state gave (or, with none yet, is marked failed and its Node labels are left alone); an
absent source is a fact and clears its fields. Bare metal comes only from both DMI and the CPU.
The swallowed-error cases of the family — a withdrawal's validation 422 and a timed-out cache
wait — are unit-tested beside their code (``test_gpuhandler_status_writer.py``,
``test_nodeagent_reconciler.py``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st
from testutil.unit.hostile.bounded import run_bounded

from pkg.inventory.desired import node_labels
from pkg.inventory.host_info import FileHostInfoReader

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "sysfs" / "a30-x2"
STATES = ("a", "b", "absent", "broken")
OS = {"a": ("ubuntu", "22.04", "Ubuntu"), "b": ("debian", "12", "Debian GNU/Linux")}
KERNEL = {"a": "5.15.0-105-generic", "b": "6.8.0-45-generic"}
DMI = {"a": ("Supermicro", "SYS-4029GP-TRT"), "b": ("Nutanix", "AHV")}
FLAGS = {"a": "fpu vmx sse2", "b": "fpu sse2 hypervisor"}


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def _set(root: Path, step: dict[str, str]) -> None:
    os_release, kernel = root / "etc" / "os-release", root / "proc" / "sys" / "kernel" / "osrelease"
    product, cpuinfo = root / "class" / "dmi" / "id" / "product_name", root / "proc" / "cpuinfo"
    for path in (os_release, kernel, product, cpuinfo):
        _remove(path)
    state = step["os"]
    if state in OS:
        os_id, version, name = OS[state]
        os_release.write_text(f'ID={os_id}\nVERSION_ID="{version}"\nNAME="{name}"\n')
    elif state == "broken":
        os_release.write_text("ID=ubu\x00ntu\nNAME=" + "x" * 100_000 + "\n")
    state = step["kernel"]
    if state in KERNEL:
        kernel.write_text(KERNEL[state] + "\n")
    elif state == "broken":
        os.mkfifo(kernel)
    state = step["dmi"]
    if state in DMI:
        (root / "class" / "dmi" / "id" / "sys_vendor").write_text(DMI[state][0] + "\n")
        product.write_text(DMI[state][1] + "\n")
    elif state == "broken":
        os.mkfifo(product)
    state = step["cpu"]
    if state in FLAGS:
        cpuinfo.write_text(f"processor\t: 0\nflags\t\t: {FLAGS[state]}\n")
    elif state == "broken":
        cpuinfo.mkdir()


def _reads(steps: list[dict[str, str]]) -> list[tuple[tuple[object, ...], dict[str, str | None]]]:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder) / "host"
        shutil.copytree(FIXTURE, root, symlinks=True)
        reader = FileHostInfoReader(host_root=root, sysfs_root=root)
        answers: list[tuple[tuple[object, ...], dict[str, str | None]]] = []
        for step in steps:
            _set(root, step)
            info = reader.read()
            facts = (info.os_id, info.os_version, info.os_name, info.kernel_release, info.bare_metal)
            answers.append((facts, node_labels(info)))
        return answers


class _Model:
    """What each read must report, kept the way the reader must keep it."""

    def __init__(self) -> None:
        self.os: tuple[str | None, ...] | None = None  # None: nothing known
        self.kernel: tuple[str | None] | None = None
        self.bare_metal: bool | None = None  # None: nothing known

    def step(self, step: dict[str, str]) -> tuple[tuple[object, ...], set[str]]:
        if step["os"] != "broken":
            self.os = OS.get(step["os"], (None, None, None))
        if step["kernel"] != "broken":
            self.kernel = (KERNEL.get(step["kernel"]),)
        if "broken" not in (step["dmi"], step["cpu"]):
            self.bare_metal = step["dmi"] == "a" and step["cpu"] == "a"
        unknown = set()
        if self.os is None:
            unknown.add("os")
        if self.kernel is None:
            unknown.add("kernel")
        if self.bare_metal is None:
            unknown.add("bare_metal")
        facts = (
            *(self.os or (None, None, None)),
            *(self.kernel or (None,)),
            bool(self.bare_metal),
        )
        return facts, unknown


_step = st.fixed_dictionaries({source: st.sampled_from(STATES) for source in ("os", "kernel", "dmi", "cpu")})


@given(st.lists(_step, min_size=1, max_size=6))
def test_failed_reads_keep_the_last_known_facts_and_never_remove_labels(steps: list[dict[str, str]]) -> None:
    answers = run_bounded(_reads, steps)
    model = _Model()
    for step, (facts, labels) in zip(steps, answers, strict=True):
        expected, unknown = model.step(step)
        assert facts == expected, (step, facts, expected)
        if "os" in unknown:
            assert "gpu.deckhouse.io/os.id" not in labels  # left as they are on the Node
        if "kernel" in unknown:
            assert "gpu.deckhouse.io/kernel.version" not in labels
        if "bare_metal" in unknown:
            assert "gpu.deckhouse.io/baremetal" not in labels
        else:
            assert labels["gpu.deckhouse.io/baremetal"] == ("true" if expected[4] else "false")
        if step["os"] == "broken" and "os" not in unknown:
            assert labels["gpu.deckhouse.io/os.id"] == expected[0]  # the kept value, not a removal
