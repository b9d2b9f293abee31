"""The daemons' settings from the operator configuration, and why there are none."""

from __future__ import annotations

import yaml
from kubernetes.client import V1ConfigMap, V1ObjectMeta

from pkg.gpucontroller.imexensemble.settings import read_settings


def config_map(spec: object) -> V1ConfigMap:
    document = {"apiVersion": "gpu.deckhouse.io/v1alpha1", "kind": "GPUOperatorConfig", "spec": spec}
    return V1ConfigMap(metadata=V1ObjectMeta(name="cp"), data={"config.yaml": yaml.safe_dump(document)})


def test_enabled_settings_come_with_the_driver_root() -> None:
    read = read_settings(
        config_map({"driverRoot": "/run/nvidia/driver", "computeDomains": {"image": "i"}}), where="s/cp"
    )
    assert read.settings is not None
    assert (read.settings.image, read.driver_root, read.problem) == ("i", "/run/nvidia/driver", None)


def test_every_missing_or_bad_document_names_the_config_map() -> None:
    cases = [
        read_settings(None, where="s/cp"),
        read_settings(V1ConfigMap(metadata=V1ObjectMeta(name="cp"), data={}), where="s/cp"),
        read_settings(config_map({"computeDomains": {"imag": "typo"}}), where="s/cp"),
        read_settings(config_map({}), where="s/cp"),
    ]
    for read in cases:
        assert read.settings is None
        assert "s/cp" in str(read.problem)
    assert "not enabled" in str(cases[-1].problem)
