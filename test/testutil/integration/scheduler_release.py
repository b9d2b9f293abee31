"""What the API server's own kube-scheduler can allocate, by release.

Kubernetes 1.34's scheduler cannot allocate a share of a device that allows several allocations
(our TimeSlicing and MPS offers): it indexes the request's capacity by the device's position in
the request rather than in the slice (kubernetes/kubernetes#133705, fixed in 1.35 by #133706) and
re-checks the counters of the device's earlier allocations (#134100, fixed by #134103). Neither fix
is in a 1.34 patch release (docs/kubernetes-versions.md). Tests that ask the scheduler for shares
ask this module first, and on 1.34 assert the limit instead of skipping, so that a 1.34 patch
release that fixes it makes them fail and the docs get updated.
"""

from __future__ import annotations

from pkg.dra.model.slices import SupportsRaw, read_server_version

SHARES_FIXED_IN = (1, 35)


def scheduler_places_shares(kube: SupportsRaw) -> bool:
    version = read_server_version(kube)
    return (version.major, version.minor) >= SHARES_FIXED_IN
