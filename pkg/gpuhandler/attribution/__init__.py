"""Per-Pod GPU attribution: which Pod's processes use how much of each card, MIG device and share.

Once per interval (:mod:`.runnable`) gpu-handler asks the vendor backend for each card's processes
(one pass, :meth:`~pkg.backends.backend.VendorBackend.usage`), maps each PID to its container
through ``/proc/<pid>/cgroup`` (:mod:`pkg.hardware.cgroups`) and the node's Pods (:mod:`.pods`),
and joins it with the claims this node prepared (:mod:`.sampler`). The result is one sample that
two readers share: the metrics collector (:mod:`.metrics`, so a scrape never calls the vendor
library) and the claim status writer (:mod:`.claim_status`, what ``kubectl gpu top`` reads).
"""
