"""A simulated NVIDIA backend for tests and the demo: the real backend over a simulated NVML.

:mod:`data` lists the cards it knows (real models, real values), :mod:`fake_nvml` answers NVML's
calls for them, :mod:`backend` adds health overrides and the ``simulated-nvidia`` entry point.
"""
