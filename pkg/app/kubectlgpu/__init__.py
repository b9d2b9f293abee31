"""``kubectl gpu``: who holds which GPU, what it uses, and why a claim gets what it gets — from a laptop.

A kubectl plugin (the executable ``kubectl-gpu``, or ``python -m pkg.app.kubectlgpu``): it reads
the cluster with the user's own kubeconfig and rights and never writes. Its pieces, one concept
each:

* :mod:`.access` — the reads it makes, each named by verb and resource, and the errors they end
  in (forbidden, not found, unreachable), each with its exit code, so a missing permission is a
  sentence naming what was refused, never a traceback;
* :mod:`.usage` — the ``DeviceUsage`` gpu-handler writes into a claim's ``status.devices[]``,
  parsed one entry at a time so that one malformed entry spoils only its own row;
* :mod:`.who` and :mod:`.top` — rows computed from the objects read (pure functions);
* :mod:`.explain` — the allocator's ``explain`` (:mod:`pkg.dra.explain`) over what this user can
  read, saying what it could not;
* :mod:`.table` — kubectl's output forms: columns, ``-o wide``, ``-o json|yaml``;
* :mod:`.cli` — flags, kubectl's conventions, exit codes.

It lives inside ``pkg/app`` (the layer of process wiring) because it is a binary's front end that
uses the components' read side, and the layers contract lists the packages of ``pkg/`` exhaustively.
"""
