"""The steps of a publish pass, in chain order."""

from pkg.gpuhandler.publishing.handler.node import NodeHandler
from pkg.gpuhandler.publishing.handler.publish import PublishHandler
from pkg.gpuhandler.publishing.handler.select import SelectHandler
from pkg.gpuhandler.publishing.handler.startup_grace import StartupGraceHandler

__all__ = ["NodeHandler", "PublishHandler", "SelectHandler", "StartupGraceHandler"]
