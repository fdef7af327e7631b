"""Sphinx configuration of the API reference: ``sphinx-build -W docs/api <out>``."""

from __future__ import annotations

project = "lifecycle"
extensions = ["sphinx.ext.autodoc", "lifecycle.diagrams.sphinx"]
exclude_patterns = ["_build"]
autodoc_member_order = "bysource"
autodoc_typehints = "description"
html_theme = "alabaster"
