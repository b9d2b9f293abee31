"""Device taints: a ``NoSchedule`` or ``NoExecute`` taint blocks allocation unless tolerated.

Toleration matching follows ``resourceclaim.ToleratesTaint``: an empty key with ``Exists``
tolerates everything; otherwise keys must be equal; ``Exists`` ignores the value, ``Equal`` (the
default) compares it; an empty effect matches any effect. Other effects (``None``) never block.
"""

from __future__ import annotations

from collections.abc import Sequence

from kubernetes.client import V1DeviceTaint, V1DeviceToleration

_BLOCKING = frozenset({"NoSchedule", "NoExecute"})


def tolerates(toleration: V1DeviceToleration, taint: V1DeviceTaint) -> bool:
    if toleration.effect and toleration.effect != taint.effect:
        return False
    operator = toleration.operator or "Equal"
    if not toleration.key:
        return operator == "Exists"
    if toleration.key != taint.key:
        return False
    if operator == "Exists":
        return True
    return operator == "Equal" and (toleration.value or "") == (taint.value or "")


def blocking_taint(
    taints: Sequence[V1DeviceTaint] | None, tolerations: Sequence[V1DeviceToleration]
) -> V1DeviceTaint | None:
    for taint in taints or ():
        if taint.effect in _BLOCKING and not any(tolerates(t, taint) for t in tolerations):
            return taint
    return None
