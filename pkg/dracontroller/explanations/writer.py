"""The controller's two writes to a ClaimExplanation: its answer, and its deletion.

The answer is a server-side apply of ``status`` under :data:`FIELD_MANAGER`, its own manager, so it
owns exactly the status fields and never fights the allocation controller's writes (on claims) or
the requester (who owns ``spec``). The delete carries the uid as a precondition, so a request
re-created under the same name is never deleted in its predecessor's place.
"""

from __future__ import annotations

import contextlib
from typing import Final

from api.gpu.v1alpha1 import ClaimExplanation, ClaimExplanationStatus
from pkg.domain.kinds import CLAIM_EXPLANATION
from pkg.framework.client import ConflictError, KubeClient, NotFoundError

FIELD_MANAGER: Final = "gpu-dra-controller-explain"


class ExplanationWriter:
    def __init__(self, *, client: KubeClient) -> None:
        self._client = KubeClient(client.api_client, field_manager=FIELD_MANAGER)

    def answer(self, obj: ClaimExplanation, status: ClaimExplanationStatus) -> None:
        """Applies ``status`` to ``obj`` (gone or replaced meanwhile: nothing to answer; the uid in
        the body is a precondition, so a replacement is answered by its own pass)."""
        meta = obj.metadata
        body = {
            "metadata": {"name": meta.name, "namespace": meta.namespace, "uid": meta.uid},
            "status": status.to_api_dict(),
        }
        with contextlib.suppress(NotFoundError, ConflictError):
            self._client.apply(CLAIM_EXPLANATION, body, subresource="status")

    def delete(self, obj: ClaimExplanation) -> None:
        """Deletes ``obj`` if it is still the same object (gone, or replaced: nothing to do)."""
        meta = obj.metadata
        with contextlib.suppress(NotFoundError, ConflictError):
            self._client.delete(CLAIM_EXPLANATION, meta.name or "", meta.namespace, uid=meta.uid)
