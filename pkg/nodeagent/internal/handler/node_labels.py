"""Step 4, node labels: ``gpu.deckhouse.io/{baremetal,os.id,os.version,kernel.version}`` on the Node.

The driver installer and VFIO gating select nodes by these labels. Only these keys are
patched, only on the agent's own Node, and only when the cached Node differs; a label whose source
is gone is removed, while one whose source merely failed to read keeps its value
(:mod:`pkg.inventory.host_info` keeps the last known facts; :func:`~pkg.inventory.desired.node_labels`
leaves out a source that failed with nothing known yet).
"""

from __future__ import annotations

import logging

from pkg.framework.client import ApiError
from pkg.inventory.desired import label_changes, node_labels
from pkg.nodeagent.internal.service import NodeWriter
from pkg.nodeagent.internal.state import SyncState

logger = logging.getLogger(__name__)


class NodeLabelsHandler:
    name = "node-labels"

    def __init__(self, *, writer: NodeWriter) -> None:
        self._writer = writer

    def handle(self, state: SyncState) -> None:
        if state.host is None:
            raise RuntimeError("the node-labels step needs the host info of the discover step")
        subject = f"Node {state.node_name}"
        if state.node is None or state.node.metadata is None:
            state.fail(self.name, subject, LookupError("the Node is not in the cache (does it exist?)"))
            return
        changes = label_changes(state.node.metadata.labels, node_labels(state.host))
        if not changes:
            return
        try:
            state.writes += 1
            self._writer.patch_node_labels(state.node_name, changes)
        except ApiError as exc:
            state.fail(self.name, subject, exc)
            return
        logger.info("patched Node labels", extra={"node": state.node_name, "labels": changes})
