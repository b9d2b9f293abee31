"""Launcher of the kubectl plugin ``kubectl gpu``; everything lives in pkg.app.kubectlgpu."""

import sys

from pkg.app.kubectlgpu.cli import main

if __name__ == "__main__":
    sys.exit(main())
