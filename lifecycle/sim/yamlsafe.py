"""YAML decoding with a bound on alias expansion (no "billion laughs").

PyYAML shares the object an alias names instead of copying it, so a few
hundred bytes of nested aliases (``&a [*b, *b, ...]``) decode at once into a
document that every later walk (validation, JSON encoding, a deep copy)
expands to billions of nodes. :func:`load` and :func:`load_all` compose the
node graph first, count the nodes the document holds *with every alias
expanded*, and refuse it before anything is constructed when the count is
over :func:`node_budget` (or when an alias refers to one of its own
ancestors). A document without aliases always fits: its budget grows with
the length of the text.
"""

from __future__ import annotations

from typing import Any

import yaml

__all__ = ["BASE_BUDGET", "AliasBombError", "load", "load_all", "node_budget"]

#: Expanded nodes every document may hold, on top of two per byte of its text.
BASE_BUDGET = 100_000


class AliasBombError(yaml.YAMLError):
    """A document whose aliases expand beyond the node budget, or refer to themselves."""


def node_budget(text: str | bytes) -> int:
    """How many expanded nodes a text of this length may decode into.

    A node without an alias costs at least about one byte of text, so two per
    byte never refuses a document that uses no aliases.
    """
    return BASE_BUDGET + 2 * len(text)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def expanded_size(root: yaml.Node, budget: int) -> int:
    """The number of nodes under ``root`` with every alias expanded (iterative, memoised).

    Raises :class:`AliasBombError` as soon as the count passes ``budget``, or
    when a node contains itself.
    """
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, finished = stack.pop()
        key = id(node)
        children = _children(node)
        if finished:
            open_nodes.discard(key)
            total = 1
            for child in children:
                total += sizes[id(child)]
                if total > budget:
                    raise AliasBombError(f"the document expands to more than {budget} nodes "
                                         f"through its aliases")
            sizes[key] = total
            continue
        if key in sizes:
            continue
        open_nodes.add(key)
        stack.append((node, True))
        for child in children:
            if id(child) in open_nodes:
                raise AliasBombError("the document contains itself through an alias")
            if id(child) not in sizes:
                stack.append((child, False))
    return sizes[id(root)]


def load_all(text: str | bytes, budget: int | None = None) -> list[Any]:
    """Every document of ``text`` (``yaml.safe_load_all``), each checked before it is built."""
    limit = node_budget(text) if budget is None else budget
    loader = yaml.SafeLoader(text)
    try:
        docs: list[Any] = []
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                docs.append(None)
                continue
            expanded_size(node, limit)
            docs.append(loader.construct_document(node))
        return docs
    finally:
        loader.dispose()


def load(text: str | bytes, budget: int | None = None) -> Any:
    """The one document of ``text`` (``yaml.safe_load``), checked before it is built."""
    limit = node_budget(text) if budget is None else budget
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        expanded_size(node, limit)
        return loader.construct_document(node)
    finally:
        loader.dispose()
