"""Launcher of gpu-node-agent (the image's entry point); all wiring lives in pkg.app."""

import sys

from pkg.app.gpu_node_agent import main

if __name__ == "__main__":
    sys.exit(main())
