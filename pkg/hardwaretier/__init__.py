"""The hardware tier's machinery: a real GPU node checked without a cluster or a network.

``test/hardware/`` (``make test-hardware``) runs on any machine with an NVIDIA GPU, as root, from
the virtualenv or an installed wheel; this package holds what it needs beside the project's own
code, so the pieces can be unit-tested on machines without a GPU:

* :mod:`.presence` — is there a GPU at all (the tier's first check, with its own exit code);
* :mod:`.nvml_facts` and :mod:`.offer_checks` — what NVML says about each card, compared with
  what ``gpu-handler offers`` would publish and with the built-in MIG tables;
* :mod:`.claims` — a claim prepared by the gpu-handler's real preparation pipeline, with the
  API server's part (claims, offers) served from memory;
* :mod:`.container` over :mod:`.libraries`, :mod:`.rootfs`, :mod:`.bundle`, :mod:`.cdi_inject`
  and :mod:`.runc` — a runc container whose root holds busybox, glibc and one program, and
  nothing of NVIDIA's but what the CDI library applies from our specs;
* :mod:`.cuda_build` — the CUDA program built with ``nvcc`` where the node has it.

Like :mod:`pkg.devcluster` it sits outside the layers: the components never import it.
"""
