"""Which node a slice's devices are reachable from, and the NodeSelector an allocation gets.

Slice node selection mirrors ``NodeMatches``: ``nodeName`` (that node only), ``allNodes``, or a
``nodeSelector`` (terms are ORed; a term's label expressions and ``metadata.name`` fields are ANDed;
an empty term matches nothing). The allocation's ``nodeSelector`` mirrors ``createNodeSelector``:
any node-local device pins the claim to that node with ``matchFields metadata.name In [node]``;
otherwise the single-term selectors of the used slices are merged; devices reachable everywhere
need none.
"""

from __future__ import annotations

from collections.abc import Iterable

from kubernetes.client import V1Node, V1NodeSelector, V1NodeSelectorRequirement, V1NodeSelectorTerm


def node_name(node: V1Node | None) -> str | None:
    return node.metadata.name if node is not None and node.metadata is not None else None


def _requirement_matches(req: V1NodeSelectorRequirement, values: dict[str, str]) -> bool:
    present = req.key in values
    actual = values.get(req.key, "")
    operator = req.operator
    if operator == "In":
        return present and actual in (req.values or ())
    if operator == "NotIn":
        return not present or actual not in (req.values or ())
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    if operator in ("Gt", "Lt") and present and len(req.values or ()) == 1:
        try:
            left, right = int(actual), int((req.values or ["0"])[0])
        except ValueError:
            return False
        return left > right if operator == "Gt" else left < right
    return False


def selector_matches(selector: V1NodeSelector, node: V1Node) -> bool:
    labels = dict(node.metadata.labels or {}) if node.metadata is not None else {}
    fields = {"metadata.name": node_name(node) or ""}
    for term in selector.node_selector_terms or ():
        expressions, match_fields = term.match_expressions or (), term.match_fields or ()
        if not expressions and not match_fields:
            continue
        if all(_requirement_matches(r, labels) for r in expressions) and all(
            _requirement_matches(r, fields) for r in match_fields
        ):
            return True
    return False


def reachable(
    node: V1Node | None, *, name: str | None, all_nodes: bool, selector: V1NodeSelector | None
) -> bool:
    """Whether devices with this node selection are usable from ``node`` (None: from any node)."""
    if name:
        return node is None or node_name(node) == name
    if all_nodes:
        return True
    if selector is not None:
        return node is None or selector_matches(selector, node)
    return False


def allocation_node_selector(
    *, local_node: str | None, selectors: Iterable[V1NodeSelector]
) -> V1NodeSelector | None:
    if local_node is not None:
        field = V1NodeSelectorRequirement(key="metadata.name", operator="In", values=[local_node])
        return V1NodeSelector(node_selector_terms=[V1NodeSelectorTerm(match_fields=[field])])
    fields: list[V1NodeSelectorRequirement] = []
    expressions: list[V1NodeSelectorRequirement] = []
    for selector in selectors:
        terms = selector.node_selector_terms or []
        if len(terms) != 1:
            continue  # validation allows exactly one term on a ResourceSlice
        _merge(terms[0].match_fields or (), fields)
        _merge(terms[0].match_expressions or (), expressions)
    if not fields and not expressions:
        return None
    return V1NodeSelector(
        node_selector_terms=[
            V1NodeSelectorTerm(match_fields=fields or None, match_expressions=expressions or None)
        ]
    )


def _merge(source: Iterable[V1NodeSelectorRequirement], into: list[V1NodeSelectorRequirement]) -> None:
    for req in source:
        if not any(
            r.key == req.key and r.operator == req.operator and set(r.values or ()) == set(req.values or ())
            for r in into
        ):
            into.append(req)
