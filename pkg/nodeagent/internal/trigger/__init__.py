"""What wakes a sync: the start, kernel uevents, informer events, SIGHUP and the periodic resync.

Every trigger only adds the single ``sync`` request to the controller's queue, which de-duplicates
them; none carries data into the sync (level-based).
"""

from pkg.nodeagent.internal.trigger.periodic import PeriodicTrigger
from pkg.nodeagent.internal.trigger.sighup import install_sighup_trigger
from pkg.nodeagent.internal.trigger.udev import Debouncer, UdevTrigger, netlink_monitor
from pkg.nodeagent.internal.trigger.watch import gpu_events, node_events

__all__ = [
    "Debouncer",
    "PeriodicTrigger",
    "UdevTrigger",
    "gpu_events",
    "install_sighup_trigger",
    "netlink_monitor",
    "node_events",
]
