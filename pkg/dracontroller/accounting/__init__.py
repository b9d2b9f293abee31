"""Who holds which GPU, and for how long: allocation accounting of gpu-dra-controller.

Computed by gpu-dra-controller because it already watches every claim, slice and class of the
cluster, and only by its leader, because device-seconds are a counter with one writer: a single
leader-elected accountant keeps the ledger (:mod:`.ledger`) in a ConfigMap, so restarts and leader
changes continue the counters instead of restarting them. It covers every claim of our driver,
whoever allocated it (the kube-scheduler allocates most). Parts: :mod:`.devices` (what a claim
holds), :mod:`.ledger` (the counters), :mod:`.store` (the ConfigMap), :mod:`.events` (Events on
claims and PhysicalGPUs), :mod:`.collector` (the metric families), :mod:`.accountant` (the loop).
"""
