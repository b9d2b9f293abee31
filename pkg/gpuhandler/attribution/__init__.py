"""Per-Pod GPU attribution: which Pod's processes use how much of each card, MIG device and share.

Once per interval (:mod:`.runnable`) gpu-handler asks the vendor backend for each card's processes
(one pass, :meth:`~pkg.backends.backend.VendorBackend.usage`), maps each PID to its container
through ``/proc/<pid>/cgroup`` (:mod:`pkg.hardware.cgroups`) and the node's Pods (:mod:`.pods`),
and joins it with the claims this node prepared (:mod:`.sampler`). The result is one sample that
two readers share: the metrics collector (:mod:`.metrics`, so a scrape never calls the vendor
library) and the usage feed (:mod:`.usage_feed`, what ``kubectl gpu top`` reads).

The claims' device status lives here too, as the attribution's usage is one of its inputs: the
status book (:mod:`.status_book`) holds per claim each prepared device's identity, ``Ready`` and
``Healthy`` conditions and latest usage, fed by the kubelet plugin (:mod:`.status_reports`), the
health verdicts and the usage feed; the status loop (:mod:`.status_loop`) writes it through the
applier (:mod:`.claim_status`).
"""
