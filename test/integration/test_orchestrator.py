"""The orchestrator against the real API server: the node components' DaemonSets from a ConfigMap.

gpu-controller runs as a process with its node components in the test's namespace. From one
GPUOperatorConfig ConfigMap it creates every enabled component's DaemonSet (server-side apply,
owned by the ConfigMap); a hand edit is taken back; a component switched off is pruned; a broken
document is reported on the ConfigMap and changes nothing; an unchanged pass writes nothing (the
DaemonSets keep their generation, so no rollout); deleting the ConfigMap lets the real garbage
collector delete the DaemonSets. No DaemonSet controller runs in this tier: the e2e tier
(``test/e2e/test_gpu_controller_nodes.py``) runs their Pods on real nodes.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import yaml
from kubernetes.client import V1ConfigMap, V1ObjectMeta
from testutil.integration.gpu_controller_helpers import gpu_controller
from testutil.integration.process_helpers import eventually
from testutil.k8s_fields import labels_of, uid_of

from pkg.framework.client import KubeClient, PatchType
from pkg.framework.client.builtin_kinds import CONFIG_MAP, DAEMON_SET, EVENT

COMPONENTS = ("gpu-node-agent", "gpu-validator", "gpu-handler", "nv-hostengine", "dcgm-exporter")


def document(**changes: Any) -> dict[str, str]:
    spec: dict[str, Any] = {
        "nodeAgent": {"image": "registry.example/gcp:1", "udev": False},
        "validator": {"image": "nvcr.io/nvidia/cloud-native/gpu-operator-validator:v25.3.2"},
        "gpuHandler": {"image": "registry.example/gcp:1"},
        "dcgm": {"image": "nvcr.io/nvidia/cloud-native/dcgm:4.2.3-1-ubuntu22.04"},
        "dcgmExporter": {"image": "nvcr.io/nvidia/k8s/dcgm-exporter:4.2.3-4.1.3-ubuntu22.04"},
    }
    spec.update(changes)
    text = yaml.safe_dump(
        {"apiVersion": "gpu.deckhouse.io/v1alpha1", "kind": "GPUOperatorConfig", "spec": spec}
    )
    return {"config.yaml": text}


def daemon_sets(kube: KubeClient, namespace: str) -> dict[str, Any]:
    items, _ = kube.list(
        DAEMON_SET, namespace=namespace, label_selector="app.kubernetes.io/managed-by=gpu-controller"
    )
    return {str(labels_of(ds)["app.kubernetes.io/component"]): ds for ds in items}


def reasons(kube: KubeClient, namespace: str, config: str) -> list[str]:
    events, _ = kube.list(EVENT, namespace=namespace)
    return [str(e.reason) for e in events if e.regarding and e.regarding.name == config]


def test_the_config_map_drives_the_daemon_sets(
    kube: KubeClient, kubeconfig: str, namespace: str, tmp_path: Path
) -> None:
    config = "gcp"
    owner = kube.create(
        CONFIG_MAP, V1ConfigMap(metadata=V1ObjectMeta(name=config), data=document()), namespace=namespace
    )
    with gpu_controller(
        kubeconfig, namespace, log_path=tmp_path / "gpu-controller.log", args=[f"--operator-config={config}"]
    ):
        created = eventually(
            lambda: (found := daemon_sets(kube, namespace)) and sorted(found) == sorted(COMPONENTS) and found,
            what="every component's DaemonSet",
        )
        for component, ds in created.items():
            assert ds.metadata.name == f"{config}-{component}"
            [reference] = ds.metadata.owner_references
            assert (reference.kind, reference.uid, reference.controller) == (
                "ConfigMap",
                uid_of(owner),
                True,
            )
        assert created["gpu-validator"].spec.template.spec.node_selector == {
            "gpu.deckhouse.io/nvidia.present": "true"
        }
        generations = {c: ds.metadata.generation for c, ds in created.items()}

        # A hand edit is taken back (the controller's forced apply owns the field).
        edited = KubeClient(kube.api_client, field_manager="someone")
        edited.patch(
            DAEMON_SET,
            f"{config}-gpu-handler",
            {"spec": {"template": {"spec": {"containers": [{"name": "gpu-handler", "image": "evil:1"}]}}}},
            patch_type=PatchType.STRATEGIC,
            namespace=namespace,
        )
        eventually(
            lambda: (
                daemon_sets(kube, namespace)["gpu-handler"].spec.template.spec.containers[0].image
                == "registry.example/gcp:1"
            ),
            what="the edited image put back",
        )

        # Switching a component off prunes it; changing a setting changes only its DaemonSet.
        changed = document(
            dcgm={"enabled": False},
            nodeAgent={"image": "registry.example/gcp:1", "udev": False, "resyncPeriod": "1m"},
        )
        kube.patch(CONFIG_MAP, config, {"data": changed}, patch_type=PatchType.MERGE, namespace=namespace)
        eventually(
            lambda: "nv-hostengine" not in daemon_sets(kube, namespace), what="the disabled component pruned"
        )
        agent = eventually(
            lambda: (
                (ds := daemon_sets(kube, namespace)["gpu-node-agent"])
                and "--resync-period=1m" in ds.spec.template.spec.containers[0].args
                and ds
            ),
            what="the new setting applied",
        )
        assert agent.metadata.generation == generations["gpu-node-agent"] + 1
        time.sleep(3)  # passes of the controller in the meantime (the edit, the prune) rewrote nothing else
        now = daemon_sets(kube, namespace)
        assert now["gpu-validator"].metadata.generation == generations["gpu-validator"]
        assert now["gpu-handler"].metadata.generation == generations["gpu-handler"] + 2  # the edit, the undo
        # The exporter follows nv-hostengine: with DCGM off it embeds its own engine.
        assert now["dcgm-exporter"].metadata.generation == generations["dcgm-exporter"] + 1
        env = {e.name for e in now["dcgm-exporter"].spec.template.spec.containers[0].env}
        assert "DCGM_REMOTE_HOSTENGINE_INFO" not in env

        # A broken document is reported and changes nothing.
        kube.patch(
            CONFIG_MAP,
            config,
            {"data": {"config.yaml": "spec: {nodeAgent: {imagee: x}}"}},
            patch_type=PatchType.MERGE,
            namespace=namespace,
        )
        eventually(
            lambda: "InvalidConfig" in reasons(kube, namespace, config), what="the InvalidConfig event"
        )
        assert sorted(daemon_sets(kube, namespace)) == sorted(c for c in COMPONENTS if c != "nv-hostengine")
        assert {"DaemonSetApplied", "DaemonSetPruned"} <= set(reasons(kube, namespace, config))

        # A deleted DaemonSet comes back once the document is valid again.
        kube.patch(CONFIG_MAP, config, {"data": changed}, patch_type=PatchType.MERGE, namespace=namespace)
        kube.delete(DAEMON_SET, f"{config}-gpu-validator", namespace)
        eventually(
            lambda: (
                (ds := daemon_sets(kube, namespace).get("gpu-validator")) is not None
                and ds.metadata.uid != created["gpu-validator"].metadata.uid
            ),
            what="the deleted DaemonSet recreated",
        )

    # Uninstalling (the ConfigMap deleted) lets the garbage collector delete them all.
    kube.delete(CONFIG_MAP, config, namespace)
    eventually(
        lambda: daemon_sets(kube, namespace) == {},
        what="the garbage collector to delete the DaemonSets",
        timeout=60,
    )


def test_without_a_config_map_nothing_runs_and_nothing_fails(
    kube: KubeClient, kubeconfig: str, namespace: str, tmp_path: Path
) -> None:
    log = tmp_path / "gpu-controller.log"
    with gpu_controller(kubeconfig, namespace, log_path=log, args=["--operator-config=absent"]):
        time.sleep(3)
        assert daemon_sets(kube, namespace) == {}
    errors = [line for line in log.read_text().splitlines() if '"level": "error"' in line]
    assert errors == [], "\n".join(errors)


def test_amd_nodes_get_their_own_handler_which_goes_when_switched_off(
    kube: KubeClient, kubeconfig: str, namespace: str, tmp_path: Path
) -> None:
    """gpuHandler.amd: the API server takes both handler DaemonSets (distinct selectors); switching
    it off prunes the AMD one and puts the NVIDIA one back on every DriverReady node."""
    config = "gcp"
    handler = {"image": "registry.example/gcp:1"}
    kube.create(
        CONFIG_MAP,
        V1ConfigMap(
            metadata=V1ObjectMeta(name=config),
            data=document(gpuHandler={**handler, "amd": {"enabled": True}}),
        ),
        namespace=namespace,
    )
    with gpu_controller(
        kubeconfig, namespace, log_path=tmp_path / "gpu-controller.log", args=[f"--operator-config={config}"]
    ):
        both = eventually(
            lambda: (found := daemon_sets(kube, namespace)) and "gpu-handler-amd" in found and found,
            what="the AMD handler's DaemonSet",
        )
        amd = both["gpu-handler-amd"]
        assert amd.metadata.name == f"{config}-gpu-handler-amd"
        assert amd.spec.template.spec.node_selector == {
            "gpu.deckhouse.io/driver-ready": "true",
            "gpu.deckhouse.io/amd.present": "true",
        }
        assert "--backend=amd" in amd.spec.template.spec.containers[0].args
        assert both["gpu-handler"].spec.template.spec.node_selector == {
            "gpu.deckhouse.io/driver-ready": "true",
            "gpu.deckhouse.io/nvidia.present": "true",
        }

        kube.patch(
            CONFIG_MAP,
            config,
            {"data": document(gpuHandler=handler)},
            patch_type=PatchType.MERGE,
            namespace=namespace,
        )
        eventually(
            lambda: (
                "gpu-handler-amd" not in (found := daemon_sets(kube, namespace))
                and found["gpu-handler"].spec.template.spec.node_selector
                == {"gpu.deckhouse.io/driver-ready": "true"}
            ),
            what="the AMD handler pruned and the NVIDIA one on every DriverReady node",
        )
