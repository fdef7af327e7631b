"""Benchmarks of the engine; run them with ``lifecycle bench``."""
