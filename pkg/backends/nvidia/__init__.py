"""The NVIDIA vendor backend: NVML through a narrow port, built-in MIG tables, the filling rules.

Modules, from the library up: :mod:`nvml_port` (the port and its types), :mod:`nvml` (the pynvml
adapter), :mod:`profiles` and the generated :mod:`mig_tables` (facts of real models),
:mod:`architecture`, :mod:`mig`, :mod:`health`, :mod:`reading` (one pass over one card) and
:mod:`backend` (the port of :mod:`pkg.backends.backend`). :mod:`identity` says which cards are
NVIDIA's; :mod:`plugin` holds the entry point that builds the backend.
"""
