"""Launcher of gpu-handler (the image's entry point); all wiring lives in pkg.app."""

import sys

from pkg.app.gpu_handler import main

if __name__ == "__main__":
    sys.exit(main())
