"""``kubectl gpu who``: claims joined with slices and PhysicalGPUs where readable, free cards per node."""

from __future__ import annotations

import io

from testutil.unit.app.kubectlgpu.kubectl_gpu_objects import claim, slice_of

from api.gpu.v1alpha1.physicalgpu import PhysicalGPU
from pkg.app.kubectlgpu.table import write
from pkg.app.kubectlgpu.who import COLUMNS, FREE, UNKNOWN, Catalogue, who_view

CARDS = ["gpu-0000-02-00-0", "gpu-0000-03-00-0", "gpu-0000-04-00-0"]
POOL = "gpus/w1"


def physical_gpu(name: str, node: str, address: str) -> PhysicalGPU:
    return PhysicalGPU.model_validate(
        {
            "metadata": {"name": name, "labels": {"gpu.deckhouse.io/node": node}},
            "status": {
                "pciInfo": {
                    "address": address,
                    "class": {"code": "0302", "name": "3D controller"},
                    "vendor": {"id": "10de", "name": "NVIDIA"},
                    "device": {"id": "2330", "name": "H100"},
                }
            },
        }
    )


CLAIMS = [
    claim("ml", "train", devices=[(POOL, "gpu-0000-02-00-0", None)], pods=("trainer",)),
    claim("ml", "mig", devices=[(POOL, "gpu-0000-03-00-0-mig-1g.10gb-0", None)], pods=("a", "b")),
    claim("web", "other-node", devices=[("gpus/w2", "gpu-0000-02-00-0", None)]),
    claim("web", "not-ours", devices=[]),
]


def test_rows_name_holder_type_and_physical_gpu() -> None:
    catalogue = Catalogue([slice_of("w1", CARDS)], [physical_gpu("w1-0-10de-2330", "w1", "0000:02:00.0")])
    rows = who_view(CLAIMS, catalogue)
    assert [(r.cells["NAMESPACE"], r.cells["CLAIM"], r.cells["PODS"], r.cells["TYPE"]) for r in rows] == [
        ("ml", "train", "trainer", "Physical"),
        ("ml", "mig", "a,b", "MIG 1g.10gb"),
        ("web", "other-node", "<none>", UNKNOWN),  # w2's slice was not read
    ]
    assert rows[0].cells["PHYSICALGPU"] == "w1-0-10de-2330"  # joined by node and PCI address
    assert rows[1].cells["PHYSICALGPU"] == "gpu-0000-03-00-0"  # no PhysicalGPU: the card's name
    assert rows[1].item["uuid"] == "GPU-gpu-0000-03-00-0"


def test_node_filter_lists_free_cards_of_the_node() -> None:
    rows = who_view(CLAIMS, Catalogue([slice_of("w1", CARDS)], []), node="w1")
    assert [(r.cells["CLAIM"], r.cells["DEVICE"]) for r in rows] == [
        ("train", "gpu-0000-02-00-0"),
        ("mig", "gpu-0000-03-00-0-mig-1g.10gb-0"),
        (FREE, "gpu-0000-04-00-0"),  # the MIG device keeps card 03 busy
    ]


def test_without_readable_slices_the_claims_still_answer() -> None:
    rows = who_view(CLAIMS, None, node="w1")
    assert [(r.cells["CLAIM"], r.cells["TYPE"], r.cells["PHYSICALGPU"]) for r in rows] == [
        ("train", UNKNOWN, UNKNOWN),
        ("mig", UNKNOWN, UNKNOWN),
    ]


def test_wide_status_says_whether_each_held_device_is_prepared_and_healthy() -> None:
    def entry(device: str, *conditions: tuple[str, str, str]) -> dict[str, object]:
        return {
            "driver": "gpu.deckhouse.io",
            "pool": POOL,
            "device": device,
            "conditions": [
                {
                    "type": t,
                    "status": s,
                    "reason": r,
                    "message": "",
                    "lastTransitionTime": "2026-11-29T02:00:00Z",
                }
                for t, s, r in conditions
            ],
        }

    claims = [
        claim(
            "ml",
            "train",
            devices=[(POOL, "gpu-0000-02-00-0", None), (POOL, "gpu-0000-03-00-0", None)],
            status_devices=[
                entry(
                    "gpu-0000-02-00-0",
                    ("Ready", "True", "Prepared"),
                    ("Healthy", "False", "Xid79FallenOffBus"),
                ),
                entry("gpu-0000-03-00-0", ("Ready", "False", "MigCreateFailed")),
            ],
        ),
        claim("ml", "new", devices=[(POOL, "gpu-0000-04-00-0", None)]),
    ]
    rows = who_view(claims, Catalogue([slice_of("w1", CARDS)], []), node="w1")
    assert [(r.cells["CLAIM"], r.cells["STATUS"]) for r in rows] == [
        ("train", "Unhealthy(Xid79FallenOffBus)"),
        ("train", "NotReady(MigCreateFailed)"),
        ("new", "<not prepared>"),  # allocated, nothing reported yet
    ]
    assert rows[0].item["conditions"]["Healthy"]["reason"] == "Xid79FallenOffBus"
    assert rows[2].item["conditions"] == {}
    out = io.StringIO()
    write(out, kind="GPUHolderList", columns=COLUMNS, rows=rows, output=None)
    assert "STATUS" not in out.getvalue()  # a wide column: the default table keeps its shape
    write(out, kind="GPUHolderList", columns=COLUMNS, rows=rows, output="wide")
    assert "Unhealthy(Xid79FallenOffBus)" in out.getvalue()
