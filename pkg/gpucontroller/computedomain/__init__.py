"""The ComputeDomain controller of ``gpu-controller`` (docs/compute-domains.md): a multi-node job's
own IMEX channel, NVLink clique, claim template and IMEX daemons.

A pass, in chain order (``internal/handler/``): a deleted domain waits until none of its claims is
allocated, then removes its daemons, gives its channel back and drops its finalizer (``deletion``);
otherwise the finalizer is stored (``finalizer``), the channel DeviceClass ensured
(``device_class``), the lowest free channel taken through the channel ledger (``channel``; see
``internal/ledger``), the clique chosen or checked (``clique``), the ResourceClaimTemplate applied
(``template``), the members read from the allocated claims with stable indexes (``members``), the
daemons' ConfigMap and Pods made to match the membership (``daemons``), and the Ready state set
(``ready``). What the domain waits for (channel devices, a free channel, a template name) is in its
Ready condition, and the pass is retried with backoff.

Layout: ``setup`` (container, reconciler, watches), ``render`` (what is written, pure),
``internal/{state,settings,status,indexes,service}``, the pure ``internal/{membership,clique,ledger}``,
``internal/handler/*`` and ``internal/watch/*``.
"""
