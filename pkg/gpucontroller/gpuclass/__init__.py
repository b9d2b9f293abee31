"""The GPUClass controller of ``gpu-controller`` (docs/architecture.md#gpuclass-to-deviceclass): each GPUClass
becomes a DRA DeviceClass of the same name.

A pass validates what only the controller can judge (the schema and the CRD's CEL rules have judged
the rest), renders the DeviceClass (:mod:`.render`), server-side applies it with the GPUClass as
controlling owner (deleting the class deletes it), and reports in ``status``: ``valid``,
``message``, ``generated.deviceClassName``/``extendedResourceName`` and ``observedGeneration``.
Events mark a DeviceClass created or changed and a class turning invalid.

What makes a class invalid here:

- a DeviceClass of that name exists and was not generated from this GPUClass (an administrator's,
  or one left by a deleted class the garbage collector has not removed yet): it is never taken over;
- no ``extendedResourceName`` is set and the class name is longer than the 63 characters the
  default ``gpu.deckhouse.io/<class>`` allows;
- the API server refuses the DeviceClass (its message is the class's message).

An invalid class leaves an existing DeviceClass as it was: Pods that use it keep working while the
administrator fixes the class.

Layout: ``setup`` (container, reconciler, watches), ``render`` (GPUClass → DeviceClass, pure),
``internal/state``, ``internal/status`` (the status and its Events), ``internal/handler/*``
(``ownership``, ``apply``), ``internal/service`` (the apply).
"""
