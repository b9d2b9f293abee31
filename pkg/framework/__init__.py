"""The controller framework: a small Python counterpart of client-go and controller-runtime.

Data flows one way: watch (``cache``: reflector -> store -> informer -> listeners) -> queue
(``workqueue``) -> reconcile (``controller`` runs a ``reconcile`` template) -> handlers ->
services -> API (``client``). ``manager`` runs it all, with leader election and health; ``metrics``,
``logging`` and ``events`` are handed what they need by the process.

The framework imports nothing of the application: no ``api/`` models, no other ``pkg`` package,
no ``gpu_`` metric name (import-linter and ``test/unit/architecture`` check it). See
``docs/framework.md``.
"""
