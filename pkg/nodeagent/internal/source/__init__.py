"""The node agent's own source: kernel PCI uevents (the framework's sources cover the rest)."""

from pkg.nodeagent.internal.source.udev import Debouncer, UdevSource, netlink_monitor

__all__ = ["Debouncer", "UdevSource", "netlink_monitor"]
