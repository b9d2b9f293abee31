"""``python -m pkg.app.kubectlgpu``: the same program as the ``kubectl-gpu`` executable."""

import sys

from pkg.app.kubectlgpu.cli import main

sys.exit(main())
