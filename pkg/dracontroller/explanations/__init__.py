"""ClaimExplanations answered by gpu-dra-controller (docs/allocator.md#explain-served-by-the-controller).

A namespace user (``kubectl gpu explain``) creates a ClaimExplanation naming a claim of their
namespace; this controller, on the leader only like the allocation controller, answers it once in
``status`` from the caches and pools the allocation controller already holds, and deletes it after
a TTL. Layout: ``explainer`` (the computation: a snapshot under the decision lock, then the shared
``pkg.dra.explain.report`` outside it), ``writer`` (the status apply and the delete, under their own
field manager), ``reconciler`` (answer once, then expire).
"""
