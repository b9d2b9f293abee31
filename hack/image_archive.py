"""Builds the gpu-control-plane image without a registry, as a Docker image archive (make image-archive).

The same image ``make image`` builds from the Containerfile, assembled from the Debian archive and
PyPI (pkg/devcluster/projectimage.py); import it with ``ctr -n k8s.io images import <archive>`` or
``docker load``. Needs root (debootstrap, chroot).
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pkg.devcluster.cluster import default_bin_dir  # noqa: E402
from pkg.devcluster.projectimage import PROJECT_REPOSITORY, build_project_image  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "dist" / "gpu-control-plane-image.tar")
    parser.add_argument("--tag", action="append", help=f"image reference (default {PROJECT_REPOSITORY}:dev)")
    parser.add_argument("--cache-dir", type=Path, required=True, help="the tools' cache (images/ goes there)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="[image] %(message)s")
    archive = build_project_image(
        args.out,
        tags=args.tag or [f"{PROJECT_REPOSITORY}:dev"],
        source=ROOT,
        cache_dir=args.cache_dir,
        pip=ROOT / ".venv" / "bin" / "pip",
        tools=default_bin_dir(),
    )
    size = archive.path.stat().st_size
    print(f"{archive.path} ({size / 2**20:.0f} MiB): {', '.join(archive.references)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
