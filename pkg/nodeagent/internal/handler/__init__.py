"""The sync's steps, one per module, in chain order: discover → apply → cleanup → node labels."""

from pkg.nodeagent.internal.handler.apply import ApplyHandler
from pkg.nodeagent.internal.handler.cleanup import CleanupHandler
from pkg.nodeagent.internal.handler.discover import DiscoverHandler
from pkg.nodeagent.internal.handler.node_labels import NodeLabelsHandler

__all__ = ["ApplyHandler", "CleanupHandler", "DiscoverHandler", "NodeLabelsHandler"]
