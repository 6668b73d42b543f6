"""Label and field selectors on list requests, parsed as the API server parses them."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

# Field selectors the real API server supports per resource (others are a 400 BadRequest).
FIELDS = {
    "*": {"metadata.name", "metadata.namespace"},
    "pods": {"spec.nodeName", "status.phase", "spec.restartPolicy", "spec.schedulerName",
             "spec.serviceAccountName", "status.podIP", "status.nominatedNodeName"},
    "events": {"involvedObject.kind", "involvedObject.namespace", "involvedObject.name", "involvedObject.uid",
               "involvedObject.apiVersion", "involvedObject.resourceVersion", "involvedObject.fieldPath",
               "reason", "reportingComponent", "source", "type"},
    "nodes": {"spec.unschedulable"},
    "namespaces": {"status.phase"},
}


class SelectorError(ValueError):
    pass


Predicate = Callable[[dict[str, Any]], bool]

_SET = re.compile(r"^\s*(!?)([A-Za-z0-9./_-]+)\s*(?:(notin|in)\s*\(([^)]*)\))?\s*$")
_EQ = re.compile(r"^\s*([A-Za-z0-9./_-]+)\s*(==|=|!=)\s*([A-Za-z0-9._-]*)\s*$")


def _split(selector: str) -> list[str]:
    """Split on commas outside parentheses (``a in (x,y),b=c``)."""
    parts, depth, current = [], 0, ""
    for ch in selector:
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    parts.append(current)
    return [p for p in parts if p.strip()]


def label_selector(selector: str) -> Predicate:
    tests: list[Predicate] = []
    for term in _split(selector):
        eq = _EQ.match(term)
        if eq:
            key, op, value = eq.groups()
            tests.append(_label_eq(key, value, op == "!="))
            continue
        match = _SET.match(term)
        if not match:
            raise SelectorError(f"unable to parse requirement: {term.strip()!r}")
        bang, key, op, values = match.groups()
        if op:
            if bang:
                raise SelectorError(f"unable to parse requirement: {term.strip()!r}")
            allowed = {v.strip() for v in values.split(",") if v.strip()}
            tests.append(_label_in(key, allowed, op == "notin"))
        else:
            tests.append(_label_exists(key, bool(bang)))
    return lambda obj: all(t(obj) for t in tests)


def _labels(obj: dict[str, Any]) -> dict[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


def _label_eq(key: str, value: str, negate: bool) -> Predicate:
    return lambda obj: (_labels(obj).get(key) == value) != negate


def _label_in(key: str, values: set[str], negate: bool) -> Predicate:
    # notin matches objects without the label, as the real server does.
    return lambda obj: (_labels(obj).get(key) in values) if not negate else (_labels(obj).get(key) not in values)


def _label_exists(key: str, negate: bool) -> Predicate:
    return lambda obj: (key in _labels(obj)) != negate


def field_selector(selector: str, plural: str) -> Predicate:
    supported = FIELDS["*"] | FIELDS.get(plural, set())
    tests: list[Predicate] = []
    for term in _split(selector):
        eq = _EQ.match(term)
        if not eq:
            raise SelectorError(f"invalid selector: {selector!r}; can't understand {term.strip()!r}")
        key, op, value = eq.groups()
        if key not in supported:
            raise SelectorError(f'"{key}" is not a known field selector: only "{", ".join(sorted(supported))}"')
        tests.append(_field_eq(key, value, op == "!="))
    return lambda obj: all(t(obj) for t in tests)


def _field_value(obj: dict[str, Any], dotted: str) -> str:
    node: Any = obj
    for part in dotted.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    if isinstance(node, bool):
        return "true" if node else "false"
    if isinstance(node, dict):  # events' "source" is a map; the server selects on its component
        node = node.get("component")
    return "" if node is None else str(node)


def _field_eq(key: str, value: str, negate: bool) -> Predicate:
    return lambda obj: (_field_value(obj, key) == value) != negate
