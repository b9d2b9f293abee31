"""The lowest application layer: what every component shares about *our* objects.

Our CRD kinds over the ``api/`` models (:mod:`.kinds`), the driver name (:mod:`.names`), the
informers and indexes several components use (:mod:`.informers`, :mod:`.indexes`) and the
project's metrics provider (:mod:`.metrics`). It sits just above the framework and below
everything else, so a component never has to import another to agree on a name.
"""
