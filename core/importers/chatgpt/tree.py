"""A conversation's ``mapping`` of nodes: checked, its current branch found (parent links
walked up from ``current_node``), every node put in log order."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from core.importers.foreign import json_kind
from core.timestamps import MAX_EPOCH_MS


class _Bad(Exception):
    """What is wrong with one conversation."""


def _epoch_ms(value: Any, what: str) -> int | None:
    """Float seconds (``create_time``) as epoch milliseconds; ``None`` for null."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _Bad(f"{what} must be a number of seconds, not {json_kind(value)}")
    if value != value or value < 0 or value * 1000 > MAX_EPOCH_MS:
        raise _Bad(f"{what} {value!r} is out of range (seconds since 1970, before year 10000)")
    return round(value * 1000)


@dataclass(slots=True)
class _Node:
    key: str
    record: dict[str, Any]
    message: dict[str, Any] | None
    parent: str | None
    time: int | None


def _nodes(mapping: Any) -> dict[str, _Node]:
    if not isinstance(mapping, dict):
        raise _Bad(f"mapping must be an object of nodes, not {json_kind(mapping)}")
    nodes: dict[str, _Node] = {}
    for key, record in mapping.items():
        shown = key if len(key) <= 80 else key[:79] + "…"
        if not isinstance(record, dict):
            raise _Bad(f"node {shown!r} must be an object, not {json_kind(record)}")
        message = record.get("message")
        if message is not None and not isinstance(message, dict):
            raise _Bad(f"node {shown!r}: message must be an object, not {json_kind(message)}")
        parent = record.get("parent")
        if parent is not None and not isinstance(parent, str):
            raise _Bad(f"node {shown!r}: parent must be a node id, not {json_kind(parent)}")
        children = record.get("children", [])
        if children is not None and not (
            isinstance(children, list) and all(isinstance(c, str) for c in children)
        ):
            raise _Bad(f"node {shown!r}: children must be a list of node ids")
        time = None
        if message is not None:
            time = _epoch_ms(message.get("create_time"), f"node {shown!r}: create_time")
        nodes[key] = _Node(key, record, message, parent, time)
    return nodes


def _branch(conversation: dict[str, Any], nodes: dict[str, _Node]) -> list[str]:
    """The current branch, root first."""
    current = conversation.get("current_node")
    if current is not None and not isinstance(current, str):
        raise _Bad(f"current_node must be a node id, not {json_kind(current)}")
    if current is not None and current not in nodes:
        shown = current if len(current) <= 80 else current[:79] + "…"
        raise _Bad(f"current_node {shown!r} is not a node of the mapping")
    if current is None:
        if not nodes:
            return []
        linked = any(
            node.parent is not None or node.record.get("children") for node in nodes.values()
        )
        if not linked:  # a hand-written sample: the mapping's order is the conversation
            return list(nodes)
        parents = {node.parent for node in nodes.values()}
        leaves = [key for key in nodes if key not in parents]
        if not leaves:
            raise _Bad("the nodes' parent links form a cycle and there is no current_node")

        def written(key: str) -> int:
            time = nodes[key].time
            return -1 if time is None else time

        current = max(reversed(leaves), key=written)
    branch: list[str] = []
    seen: set[str] = set()
    key: str | None = current
    while key is not None and key in nodes:
        if key in seen:
            raise _Bad("the parent links of the current branch form a cycle")
        seen.add(key)
        branch.append(key)
        key = nodes[key].parent
    branch.reverse()
    return branch


def _log_order(nodes: dict[str, _Node], branch: list[str]) -> list[str]:
    """Every node once: depth first from the branch's root (then the other roots, then
    nodes no root reaches), a node's other children before its child on the branch."""
    children: dict[str, list[str]] = {}
    roots: list[str] = []
    for key, node in nodes.items():
        if node.parent is not None and node.parent in nodes and node.parent != key:
            children.setdefault(node.parent, []).append(key)
        else:
            roots.append(key)
    on_branch = set(branch)
    if branch:
        roots.remove(branch[0])
        roots.insert(0, branch[0])
    order: list[str] = []
    seen: set[str] = set()
    for start in [*roots, *nodes]:
        if start in seen:
            continue
        stack = [start]
        while stack:
            key = stack.pop()
            if key in seen:
                continue
            seen.add(key)
            order.append(key)
            kids = children.get(key, [])
            stack.extend(k for k in kids if k in on_branch)
            stack.extend(reversed([k for k in kids if k not in on_branch]))
    return order
