"""The three ways the API server changes an object: JSON merge patch, strategic merge patch, server-side apply.

Each follows the real API server for the shapes gpuready sends. Known simplification (see
the README, "The lab's Kubernetes API emulator"): server-side apply treats every list as atomic, where the real server
merges lists such as ``containers`` by key; gpuready always applies whole objects, so the
outcome is the same for its calls.
"""

from __future__ import annotations

import copy
from typing import Any

Path = tuple[str, ...]

# patchMergeKey of the lists Kubernetes merges by key in strategic merge patches (from the API's Go types).
MERGE_KEYS = {
    "containers": "name", "initContainers": "name", "ephemeralContainers": "name", "volumes": "name",
    "volumeMounts": "mountPath", "env": "name", "ports": "containerPort", "imagePullSecrets": "name",
    "conditions": "type", "ownerReferences": "uid", "hostAliases": "ip", "volumeDevices": "devicePath",
}
# Fields no apply or update ever owns: identity and bookkeeping.
UNOWNED = {("apiVersion",), ("kind",), ("metadata", "name"), ("metadata", "namespace"),
           ("metadata", "resourceVersion"), ("metadata", "managedFields"), ("metadata", "uid"),
           ("metadata", "creationTimestamp"), ("metadata", "generation")}


def json_merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: maps merge recursively, null deletes, anything else (lists included) replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = json_merge_patch(result.get(key), value)
    return result


def strategic_merge_patch(target: Any, patch: Any, field: str = "") -> Any:
    """Kubernetes' strategic merge: like JSON merge, but lists with a merge key merge item by item,
    ``$patch: delete`` removes an item and ``$patch: replace`` replaces a map."""
    if isinstance(patch, dict):
        if patch.get("$patch") == "replace":
            return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
        if patch.get("$patch") == "delete":
            return None
        result = copy.deepcopy(target) if isinstance(target, dict) else {}
        for key, value in patch.items():
            if key.startswith("$"):
                continue  # $retainKeys, $setElementOrder: ordering hints we do not need
            if value is None:
                result.pop(key, None)
            else:
                result[key] = strategic_merge_patch(result.get(key), value, key)
        return result
    if isinstance(patch, list) and field in MERGE_KEYS and isinstance(target, list):
        key = MERGE_KEYS[field]
        result = copy.deepcopy(target)
        for item in patch:
            if not isinstance(item, dict) or key not in item:
                continue
            index = next((i for i, t in enumerate(result) if isinstance(t, dict) and t.get(key) == item[key]), None)
            if item.get("$patch") == "delete":
                if index is not None:
                    del result[index]
            elif index is None:
                result.append(copy.deepcopy(item))
            else:
                result[index] = strategic_merge_patch(result[index], item)
        return result
    return copy.deepcopy(patch)


def leaves(obj: Any, prefix: Path = ()) -> dict[Path, Any]:
    """The fields a configuration sets: paths to scalars, lists (atomic) and empty maps."""
    if isinstance(obj, dict) and obj:
        out: dict[Path, Any] = {}
        for key, value in obj.items():
            out.update(leaves(value, (*prefix, key)))
        return out
    return {prefix: obj} if prefix else {}


def owned_paths(config: dict[str, Any]) -> set[Path]:
    return {p for p in leaves(config) if p not in UNOWNED and p[:1] != ("status",)}


def get_path(obj: Any, path: Path) -> Any:
    for key in path:
        if not isinstance(obj, dict) or key not in obj:
            return _MISSING
        obj = obj[key]
    return obj


def set_path(obj: dict[str, Any], path: Path, value: Any) -> None:
    for key in path[:-1]:
        if not isinstance(obj.get(key), dict):
            obj[key] = {}
        obj = obj[key]
    obj[path[-1]] = copy.deepcopy(value)


def remove_path(obj: dict[str, Any], path: Path) -> None:
    """Remove a field, and the maps it leaves empty (as the real server prunes them)."""
    parents = []
    node: Any = obj
    for key in path[:-1]:
        if not isinstance(node, dict) or key not in node:
            return
        parents.append((node, key))
        node = node[key]
    if isinstance(node, dict):
        node.pop(path[-1], None)
    for parent, key in reversed(parents):
        if parent[key] == {}:
            del parent[key]
        else:
            break


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


_MISSING = _Missing()


def to_fields_v1(paths: set[Path]) -> dict[str, Any]:
    """managedFields' fieldsV1 form: {"f:metadata": {"f:labels": {"f:app": {}}}}."""
    tree: dict[str, Any] = {}
    for path in sorted(paths):
        node = tree
        for key in path:
            node = node.setdefault(f"f:{key}", {})
    return tree


def from_fields_v1(tree: dict[str, Any], prefix: Path = ()) -> set[Path]:
    paths: set[Path] = set()
    for key, sub in tree.items():
        if not key.startswith("f:"):
            continue
        path = (*prefix, key[2:])
        paths |= from_fields_v1(sub, path) if sub else {path}
    return paths


class ApplyConflict(Exception):
    def __init__(self, conflicts: list[tuple[str, Path]]) -> None:
        super().__init__(conflicts)
        self.conflicts = conflicts


def diff_paths(before: dict[str, Any], after: dict[str, Any]) -> set[Path]:
    """Paths whose value an update changed (for ownership by Update managers)."""
    old, new = leaves(before), leaves(after)
    return {p for p in set(old) | set(new) if old.get(p, _MISSING) != new.get(p, _MISSING)}


Ownership = dict[tuple[str, str], set[Path]]


def server_side_apply(current: dict[str, Any] | None, config: dict[str, Any], manager: str, force: bool,
                      managed: Ownership) -> tuple[dict[str, Any], Ownership]:
    """Apply ``config`` as ``manager``: returns the new object and the new ownership table.

    ``managed`` maps (manager, operation) to the paths it owns. A field another manager owns
    with a different value is a conflict unless ``force``; fields this manager applied before
    and no longer applies are removed unless someone else still owns them.
    """
    wanted = owned_paths(config)
    new_managed = {k: set(v) for k, v in managed.items()}
    mine = (manager, "Apply")
    base = copy.deepcopy(current) if current is not None else {}
    conflicts = []
    for (other, operation), paths in managed.items():
        if (other, operation) == mine:
            continue
        for path in wanted & paths:
            if get_path(base, path) != get_path(config, path):
                conflicts.append((other, path))
    if conflicts and not force:
        raise ApplyConflict(sorted(conflicts))
    for other_key, paths in new_managed.items():
        if other_key == mine:
            continue
        for path in wanted:
            # A value changed by force moves the field to us; an equal value is shared.
            if path in paths and get_path(base, path) != get_path(config, path):
                paths.discard(path)
    before = new_managed.get(mine, set())
    others = set().union(*(p for k, p in new_managed.items() if k != mine)) if new_managed else set()
    for path in before - wanted:
        if path not in others:
            remove_path(base, path)
    for path in wanted:
        value = get_path(config, path)
        # An empty map in a configuration claims the map, not its entries: others' keys stay.
        if value == {} and isinstance(get_path(base, path), dict):
            continue
        if value is None:  # an explicit null claims the field and leaves it unset, as the server stores it
            remove_path(base, path)
            continue
        set_path(base, path, value)
    new_managed[mine] = wanted
    for key in ("apiVersion", "kind"):
        base.setdefault(key, config.get(key))
    for key in ("name", "namespace"):
        if config.get("metadata", {}).get(key):
            base.setdefault("metadata", {}).setdefault(key, config["metadata"][key])
    return base, {k: v for k, v in new_managed.items() if v}
