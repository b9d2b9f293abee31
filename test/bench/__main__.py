"""``python test/bench`` runs :mod:`run` (``python -m test.bench`` cannot: see ``run.py``)."""

from run import main

if __name__ == "__main__":
    main()
