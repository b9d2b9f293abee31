"""gpu-controller's controllers (Deployment, leader-elected): ``physicalgpu`` (DriverReady from the
GPU validator's Pod, orphan cleanup, inventory metrics), ``nodelabels`` (the node gate labels),
``orchestrator`` (the node components' DaemonSets) and ``gpuclass`` (GPUClass → DeviceClass).
:mod:`.names` holds what they share: the gate labels and the node components' names and labels."""
