"""Services of the enrichment: the status writer (every API write) and, publicly in
:mod:`pkg.gpuhandler.card_specs`, the card store the publisher reads."""

from pkg.gpuhandler.internal.service.status_writer import FIELD_MANAGER, KubeStatusWriter, StatusWriter

__all__ = ["FIELD_MANAGER", "KubeStatusWriter", "StatusWriter"]
