"""Step 1: the Node must be there and alive.

Without it there is no owner for the slices, so nothing is written (its create event wakes the
next pass); a Node being deleted is left to the garbage collector, which removes the slices it owns.
"""

from __future__ import annotations

import logging

from pkg.framework.reconcile import Result, StopHandlerChain
from pkg.gpuhandler.publishing.state import PublishState

logger = logging.getLogger("pkg.gpuhandler.publishing.reconciler")  # the pass's log, as before


class NodeHandler:
    name = "node"

    def handle(self, state: PublishState) -> Result | None:
        node = state.node
        if node is None or node.metadata is None or not node.metadata.uid:
            logger.warning(
                "the Node is not in the cache; publishing waits for it", extra={"node": state.node_name}
            )
            raise StopHandlerChain(reason="no Node")
        if node.metadata.deletion_timestamp is not None:
            logger.info("the Node is being deleted; its slices go with it", extra={"node": state.node_name})
            raise StopHandlerChain(reason="Node being deleted")
        return None
