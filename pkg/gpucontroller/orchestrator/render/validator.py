"""The GPU validator on nodes with NVIDIA PhysicalGPUs (gate ``gpu.deckhouse.io/nvidia.present``).

NVIDIA's validator, unchanged (docs/architecture.md#vendor-components-run-unchanged): the validation runs in
the init container ``driver-validation`` (by default ``sh -c nvidia-validator`` with ``COMPONENT=driver`` and
``WITH_WAIT=false``, so a driver that is not there fails the container instead of waiting
silently), privileged and with the host's root read-only at ``/host`` and, for a driver not
installed on the host's root (``driverRoot`` other than ``/``, the same setting gpu-handler's base
CDI spec reads), the driver root at ``/run/nvidia/driver``, where the image looks for a
containerised driver. The main container only waits, and with
``readinessCommand`` keeps checking; the Pod is therefore Ready exactly when the validation passed
(and still passes). gpu-controller reads nothing but that readiness (``DriverReady``).

A failed validation shows as the init container's error with its log as the termination message
(``FallbackToLogsOnError``), which DriverReady=False then carries to the PhysicalGPU.
"""

from __future__ import annotations

from kubernetes.client import V1DaemonSet, V1ExecAction, V1PodSpec, V1Probe, V1SecurityContext, V1VolumeMount

from pkg.gpucontroller.names import LABEL_NVIDIA_PRESENT, Component
from pkg.gpucontroller.orchestrator.render.common import (
    RenderContext,
    container,
    daemon_set,
    env_of,
    gate_selector,
    host_path,
)

VALIDATION_ENV = {"COMPONENT": "driver", "WITH_WAIT": "false"}
# Waits until told to stop; a TERM trap so that the Pod ends at once instead of after its grace period.
WAIT_SCRIPT = "echo GPU validation passed; trap 'exit 0' TERM INT; while true; do sleep 3600 & wait $!; done"
GRACE_SECONDS = 5


def render(context: RenderContext) -> V1DaemonSet:
    settings = context.spec.validator
    validation = container(
        settings,
        name="driver-validation",
        command=["sh", "-c"],
        args=["nvidia-validator"],
        env=env_of(VALIDATION_ENV),
    )
    validation.security_context = V1SecurityContext(privileged=True)
    validation.termination_message_policy = "FallbackToLogsOnError"
    # The driver root propagates mounts (a containerised driver mounts itself there after the Pod
    # started); the host's root needs no propagation, which a host whose / is not a shared mount
    # could not give.
    mounts = [V1VolumeMount(name="host-root", mount_path="/host", read_only=True)]
    volumes = [host_path("host-root", settings.host_root, "Directory")]
    driver_root = context.spec.driver_root
    if driver_root != "/":
        mounts.append(
            V1VolumeMount(
                name="driver-root", mount_path="/run/nvidia/driver", mount_propagation="HostToContainer"
            )
        )
        volumes.append(host_path("driver-root", driver_root, "DirectoryOrCreate"))
    validation.volume_mounts = mounts
    wait = container(
        settings.model_copy(update={"command": None, "args": None}),
        name="validator",
        command=["sh", "-c"],
        args=[WAIT_SCRIPT],
    )
    wait.resources = settings.resources
    wait.volume_mounts = [m.model_copy() for m in mounts if m.name == "host-root"]
    if settings.readiness_command:
        # By its wire name: the model's Python name for ``exec`` (``var_exec``) is not accepted.
        wait.readiness_probe = V1Probe.model_validate(
            {
                "exec": V1ExecAction(command=list(settings.readiness_command)),
                "periodSeconds": 5,
                "timeoutSeconds": 5,
                "failureThreshold": 1,
            }
        )
    pod = V1PodSpec(
        init_containers=[validation],
        containers=[wait],
        termination_grace_period_seconds=GRACE_SECONDS,
        node_selector=gate_selector(LABEL_NVIDIA_PRESENT, settings),
        volumes=volumes,
    )
    return daemon_set(context, Component.VALIDATOR, settings, pod=pod)
