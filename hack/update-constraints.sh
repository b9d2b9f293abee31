#!/usr/bin/env bash
# Re-pins every Python package the virtualenv installs: a fresh virtualenv resolves pyproject's
# ranges to the newest releases, writes them to requirements/constraints.txt, and `make install`
# then installs exactly those, so a new release on PyPI never changes what a fresh machine gets.
set -Eeuo pipefail
cd "$(dirname "$0")/.."
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
python3 -m venv "$tmp/venv"
"$tmp/venv/bin/pip" install --quiet pip==26.3
"$tmp/venv/bin/pip" install --quiet '.[dev]'
{
  echo "# Exact versions of every Python package .venv installs (make install uses it as constraints)."
  echo "# Regenerate with 'make deps-update' after changing pyproject.toml; commit the result."
  "$tmp/venv/bin/pip" freeze --all --exclude-editable | grep -v -E "^(gpu-control-plane|pip)( @|==)" | LC_ALL=C sort -f
} > requirements/constraints.txt
echo "requirements/constraints.txt updated"
