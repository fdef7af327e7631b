"""What is built on the PostgreSQL provider rather than part of it.

- :mod:`~lifecycle.providers.postgres.scenarios.testing`: harness environments and
  manifests of the PostgreSQL kinds on a real server.
- :mod:`~lifecycle.providers.postgres.scenarios.demo`: the ``postgres`` demo (the
  ``lifecycle.demos`` entry point).
- :mod:`~lifecycle.providers.postgres.scenarios.verify`: the crash explorer's targets,
  named by the kinds' registrations.

These modules use the harness and the crash explorer; the provider's own modules never
import them.
"""
