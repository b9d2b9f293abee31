"""``PYTHONPATH=test python -m bench`` runs :mod:`bench.run` (why not ``-m test.bench``: see there)."""

from bench.run import main

if __name__ == "__main__":
    main()
