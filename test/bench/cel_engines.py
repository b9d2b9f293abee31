"""Micro-benchmark: µs per evaluation of a typical DRA selector in three Python CEL engines.

Run: ``PYTHONPATH=test .venv/bin/python -m bench.cel_engines``. Engines that are not installed are skipped
(only cel-expr-python is a project dependency; install the others into the venv to compare:
``pip install common-expression-language==0.10.0 cel-python``).

Every engine evaluates the same selector on the same device, with a Kubernetes-exact ``quantity``
(our :mod:`pkg.dra.allocator.quantity`) behind ``quantity()`` and ``compareTo``:

* *cached input*: the device's variables are built once and reused (the allocator's steady state:
  selector results are cached per device, so this is the cost of a new expression on a known device);
* *fresh input*: the device's variables are built for every evaluation (a device seen for the
  first time).
"""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Callable
from typing import Any

from kubernetes.client import V1Device, V1DeviceAttribute, V1DeviceCapacity

from pkg.dra.allocator.cel_env import CelEnvironment, device_input
from pkg.dra.allocator.cel_library import QUANTITY_TAG, encode_quantity
from pkg.dra.allocator.quantity import parse_quantity

DRIVER = "gpu.deckhouse.io"
SELECTOR = (
    f'device.driver == "{DRIVER}" && device.attributes["{DRIVER}"].deviceType == "MIG" && '
    f'device.capacity["{DRIVER}"].memory.compareTo(quantity("10Gi")) >= 0'
)
DEVICE = V1Device(
    name="gpu-0000-02-00-0-mig-5-0",
    attributes={
        "vendor": V1DeviceAttribute(string="nvidia"),
        "deviceType": V1DeviceAttribute(string="MIG"),
        "device": V1DeviceAttribute(string="a30-pcie"),
        "migProfile": V1DeviceAttribute(string="2g.12gb"),
        "ccMajor": V1DeviceAttribute(int=8),
    },
    capacity={"memory": V1DeviceCapacity(value="12032Mi")},
)


def measure(fn: Callable[[], object], *, seconds: float = 0.5) -> float:
    assert fn() is True, "the selector must match the device"
    runs, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        for _ in range(100):
            fn()
        runs += 100
    return elapsed / runs * 1e6


def plain_device() -> dict[str, Any]:
    attributes = {
        k: (v.string if v.string is not None else v.int) for k, v in (DEVICE.attributes or {}).items()
    }
    capacity = {k: encode_quantity(parse_quantity(v.value)) for k, v in (DEVICE.capacity or {}).items()}
    return {
        "driver": DRIVER,
        "allowMultipleAllocations": False,
        "attributes": {DRIVER: attributes},
        "capacity": {DRIVER: capacity},
    }


def compare_to(a: str, b: str) -> int:
    x, y = int(a[len(QUANTITY_TAG) :]), int(b[len(QUANTITY_TAG) :])
    return (x > y) - (x < y)


def bench_cel_expr_python(seconds: float) -> dict[str, float]:
    env = CelEnvironment()
    selector = env.compile(SELECTOR)
    cached = device_input(DRIVER, DEVICE)
    return {
        "cached input": measure(lambda: env.matches(selector, cached), seconds=seconds),
        "fresh input": measure(lambda: env.matches(selector, device_input(DRIVER, DEVICE)), seconds=seconds),
    }


def bench_common_expression_language(seconds: float) -> dict[str, float]:
    import cel  # type: ignore[import-not-found]

    program = cel.compile(SELECTOR)
    functions = {"quantity": lambda s: encode_quantity(parse_quantity(s)), "compareTo": compare_to}
    context = cel.Context(variables={"device": plain_device()}, functions=functions)
    return {
        "cached input": measure(lambda: program.execute(context), seconds=seconds),
        "fresh input": measure(
            lambda: program.execute(cel.Context(variables={"device": plain_device()}, functions=functions)),
            seconds=seconds,
        ),
    }


def bench_cel_python(seconds: float) -> dict[str, float]:
    import celpy  # type: ignore[import-not-found]
    from celpy import celtypes

    env = celpy.Environment()
    functions = {
        "quantity": lambda s: celtypes.StringType(encode_quantity(parse_quantity(str(s)))),
        "compareTo": lambda a, b: celtypes.IntType(compare_to(str(a), str(b))),
    }
    program = env.program(env.compile(SELECTOR), functions=functions)
    cached = {"device": celpy.json_to_cel(plain_device())}
    return {
        "cached input": measure(lambda: bool(program.evaluate(cached)), seconds=seconds),
        "fresh input": measure(
            lambda: bool(program.evaluate({"device": celpy.json_to_cel(plain_device())})), seconds=seconds
        ),
    }


ENGINES = {
    "cel-expr-python": ("cel_expr_python", bench_cel_expr_python),
    "common-expression-language": ("cel", bench_common_expression_language),
    "cel-python": ("celpy", bench_cel_python),
}


def main(*, quick: bool = False) -> None:
    seconds = 0.05 if quick else 0.5
    print(f"selector: {SELECTOR}")
    for name, (module, bench) in ENGINES.items():
        if importlib.util.find_spec(module) is None:
            print(f"{name:28} not installed, skipped")
            continue
        figures = bench(seconds)
        print(f"{name:28} " + "  ".join(f"{k}: {v:8.2f} µs/eval" for k, v in figures.items()))


if __name__ == "__main__":
    main()
