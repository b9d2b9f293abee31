"""The ``gpu.deckhouse.io`` API group. One sub-package per served version; ``v1alpha1`` is the only one."""
