"""Label selectors: parsing the string form and matching labels against it."""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping

import attrs

from lifecycle.kube.errors import Invalid

__all__ = [
    "LabelSelector",
    "Requirement",
    "parse_label_selector",
    "valid_label_key",
    "valid_label_value",
]

_NAME = r"[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?"
_KEY = rf"(?:[a-z0-9](?:[-a-z0-9.]*[a-z0-9])?/)?{_NAME}"
_KEY_RE = re.compile(rf"^{_KEY}$")
_VALUE_RE = re.compile(rf"^(?:{_NAME})?$")
_EQUALITY_RE = re.compile(rf"^\s*({_KEY})\s*(==|!=|=)\s*({_NAME})?\s*$")
_SET_RE = re.compile(rf"^\s*({_KEY})\s+(in|notin)\s*\(([^()]*)\)\s*$")
_EXISTS_RE = re.compile(rf"^\s*({_KEY})\s*$")
_NOT_EXISTS_RE = re.compile(rf"^\s*!\s*({_KEY})\s*$")
_COMPARE_RE = re.compile(rf"^\s*({_KEY})\s*(>|<)\s*(-?\d+)\s*$")


def valid_label_key(key: object) -> bool:
    if not isinstance(key, str) or not _KEY_RE.match(key):
        return False
    prefix, _, name = key.rpartition("/")
    return len(name) <= 63 and len(prefix) <= 253


def valid_label_value(value: object) -> bool:
    return isinstance(value, str) and len(value) <= 63 and bool(_VALUE_RE.match(value))


@attrs.frozen
class Requirement:
    """One clause of a label selector.

    ``operator`` is one of ``=``, ``!=``, ``in``, ``notin``, ``exists``,
    ``!`` (does not exist), ``>`` and ``<`` (integer comparisons).
    """

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether ``labels`` satisfy this clause, with the API server's semantics."""
        op = self.operator
        present = self.key in labels
        if op == "exists":
            return present
        if op == "!":
            return not present
        if op in ("=", "in"):
            return present and labels[self.key] in self.values
        if op in ("!=", "notin"):
            return not present or labels[self.key] not in self.values
        if not present:
            return False
        try:
            actual = int(labels[self.key])
        except ValueError:
            return False
        bound = int(self.values[0])
        return actual > bound if op == ">" else actual < bound


@attrs.frozen
class LabelSelector:
    """A parsed label selector: every requirement must hold (an empty one matches all)."""

    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        """Whether an object with ``labels`` is selected."""
        labels = labels or {}
        return all(req.matches(labels) for req in self.requirements)


def _split_top_level(text: str) -> list[str]:
    parts: list[str] = []
    depth = 0
    start = 0
    for index, char in enumerate(text):
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth < 0:
                raise Invalid(f"unable to parse requirement: unbalanced ')' in {text!r}")
        elif char == "," and depth == 0:
            parts.append(text[start:index])
            start = index + 1
    if depth != 0:
        raise Invalid(f"unable to parse requirement: unbalanced '(' in {text!r}")
    parts.append(text[start:])
    return parts


def _parse_requirement(part: str) -> Requirement:
    if match := _EQUALITY_RE.match(part):
        key, op, value = match.group(1), match.group(2), match.group(3) or ""
        op = "=" if op == "==" else op
        values: tuple[str, ...] = (value,)
    elif match := _SET_RE.match(part):
        key, op = match.group(1), match.group(2)
        values = tuple(v.strip() for v in match.group(3).split(","))
        if values == ("",):
            raise Invalid(f"unable to parse requirement {part.strip()!r}: empty value set")
    elif match := _NOT_EXISTS_RE.match(part):
        key, op, values = match.group(1), "!", ()
    elif match := _EXISTS_RE.match(part):
        key, op, values = match.group(1), "exists", ()
    elif match := _COMPARE_RE.match(part):
        key, op, values = match.group(1), match.group(2), (match.group(3),)
    else:
        raise Invalid(f"unable to parse requirement {part.strip()!r}")
    if not valid_label_key(key):
        raise Invalid(f"invalid label key {key!r}")
    if op not in (">", "<"):
        for value in values:
            if not valid_label_value(value):
                raise Invalid(f"invalid label value {value!r} for key {key!r}")
    return Requirement(key, op, values)


@functools.lru_cache(maxsize=256)
def parse_label_selector(text: str | None) -> LabelSelector:
    """Parse a label selector string as ``kubectl -l`` accepts it.

    Supports ``a=b``, ``a==b``, ``a!=b``, ``a in (x,y)``, ``a notin (x)``,
    ``a``, ``!a``, ``a>1``, ``a<1``, joined by commas. An empty or ``None``
    selector matches everything. Raises :class:`Invalid` when malformed.
    """
    if text is None or not text.strip():
        return LabelSelector()
    return LabelSelector(tuple(_parse_requirement(part) for part in _split_top_level(text)))
