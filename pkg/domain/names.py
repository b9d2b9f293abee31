"""Names the whole project shares: the DRA driver and the attribute domain.

The driver name is also the domain of our device attributes and capacities
(docs/architecture.md#names-the-api-server-accepts), so ``device.attributes["gpu.deckhouse.io"].vendor`` and
``spec.driver == "gpu.deckhouse.io"`` name the same thing. Label names of our objects are part of the API and
live in ``api.gpu.v1alpha1``.
"""

from __future__ import annotations

from typing import Final

DRIVER: Final = "gpu.deckhouse.io"
"""The DRA driver name: ResourceSlices' ``spec.driver``, allocation results, device classes."""

DOMAIN: Final = DRIVER
"""The qualified-name domain of device attributes and capacities."""

__all__ = ["DOMAIN", "DRIVER"]
