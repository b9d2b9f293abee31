"""The enrichment: each of this node's PhysicalGPUs read through the vendor backend, its
gpu-handler fields kept current, and its offer description kept for the publisher.

Once the validator reports ``DriverReady=True`` for a card bound to its vendor's driver, the
enrichment writes ``status.capabilities``, ``status.currentState.nvidia``, ``HardwareHealthy``
and, on a card in a multi-node NVLink fabric, ``ComputeDomainsReady``, by server-side apply of
only its own fields, and keeps them current (on change, when the kubelet plugin changed a card,
and every re-enrichment period). One module per job:

* :mod:`.readiness` — may the backend read a card now (:class:`~.readiness.Readiness`), and
  :class:`~.readiness.Holds`, the cards passed through to VMs for claims;
* :mod:`.owned` — the fields the gpu-handler owns, and whether an object already has them;
* :mod:`.state` — what one pass over one card knows (:class:`~.state.EnrichmentState`);
* :mod:`.handler` — the steps of a pass, and :mod:`.chain` their one declaration, in order;
* :mod:`.status_writer` — every API write of the enrichment;
* :mod:`.card_specs` — :class:`~.card_specs.CardSpecs`, each card as the offer builder needs it,
  which the publisher reads;
* :mod:`.reconciler` — the chain as a reconciler, one request per card;
* :mod:`.watches` — which PhysicalGPU events wake a card's pass;
* :mod:`.card_changes` — :class:`~.card_changes.EnrichmentCardChanges`, how the kubelet plugin
  asks for a card to be read again;
* :mod:`.compute_domains` — :class:`~.compute_domains.NodeChannels`, the publish pass's IMEX
  channel decision, which ``ComputeDomainsReady`` reports;
* :mod:`.setup` — the controller that runs it all.

The gpu-handler's composition root (:mod:`pkg.gpuhandler.setup`) builds the parts, and the
offline ``offers`` command (:mod:`pkg.gpuhandler.offline`) runs the same chain without a cluster.
"""
