"""Launcher of gpu-dra-controller (the image's entry point); all wiring lives in pkg.app."""

import sys

from pkg.app.gpu_dra_controller import main

if __name__ == "__main__":
    sys.exit(main())
