"""API types of gpu-control-plane: the custom resources it owns, as pydantic models.

``api.gpu.v1alpha1`` holds the models of the ``gpu.deckhouse.io`` group. ``api.crdgen`` turns those
models into CustomResourceDefinitions, so the schema the API server enforces and the models the
controllers read and write come from one source (see ``hack/generate_crds.py``).
"""
