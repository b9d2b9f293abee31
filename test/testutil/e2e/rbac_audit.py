"""The RBAC audit: what each component's ServiceAccount called (the API server's audit log of a run)
against what the chart grants it (the release's Roles, ClusterRoles and their bindings).

A permission is (API group, resource[/subresource], verb). ``watch`` is its own verb in the audit
log, as in RBAC; a server-side apply that creates its object is logged as ``patch`` (201) but the
API server authorizes it for ``create`` too, so it counts as both. Resource names in rules are not
compared: the chart narrows some rules to names (leases) and the calls always name those.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

Permission = tuple[str, str, str]  # (apiGroup, resource[/subresource], verb)


def calls(audit_log: Path, namespace: str) -> dict[str, set[Permission]]:
    """Per ServiceAccount of ``namespace``: the permissions its requests needed."""
    prefix = f"system:serviceaccount:{namespace}:"
    used: dict[str, set[Permission]] = defaultdict(set)
    for line in audit_log.read_text().splitlines():
        event = json.loads(line)
        user = event.get("user", {}).get("username", "")
        ref = event.get("objectRef")
        if not user.startswith(prefix) or ref is None or event.get("stage") != "ResponseComplete":
            continue
        resource = ref.get("resource", "")
        if ref.get("subresource"):
            resource += "/" + ref["subresource"]
        account, group = user.removeprefix(prefix), ref.get("apiGroup", "")
        used[account].add((group, resource, event["verb"]))
        # A server-side apply that created the object (201) was authorized for create as well.
        if event["verb"] == "patch" and event.get("responseStatus", {}).get("code") == 201:
            used[account].add((group, resource, "create"))
    return dict(used)


def grants(manifest: Iterable[dict[str, Any]], namespace: str) -> dict[str, set[Permission]]:
    """Per ServiceAccount of ``namespace``: the permissions the release's bindings give it."""
    docs = list(manifest)
    roles = {
        (d["kind"], d["metadata"]["name"]): d.get("rules", [])
        for d in docs
        if d["kind"] in ("Role", "ClusterRole")
    }
    granted: dict[str, set[Permission]] = defaultdict(set)
    for binding in (d for d in docs if d["kind"] in ("RoleBinding", "ClusterRoleBinding")):
        ref = binding["roleRef"]
        rules = roles.get((ref["kind"], ref["name"]), [])
        for subject in binding.get("subjects", []):
            if subject["kind"] != "ServiceAccount" or subject.get("namespace", namespace) != namespace:
                continue
            for rule in rules:
                for group in rule.get("apiGroups", []):
                    for resource in rule.get("resources", []):
                        for verb in rule["verbs"]:
                            granted[subject["name"]].add((group, resource, verb))
    return dict(granted)


def describe(permissions: Iterable[Permission]) -> list[str]:
    return sorted(f"{verb} {group or 'core'}/{resource}" for group, resource, verb in permissions)
