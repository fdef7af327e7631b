"""Lifecycle machines of resource kinds: the standard managed machine and bundled kinds."""
