"""What is built on the simulated cloud provider rather than part of it.

- :mod:`~lifecycle.providers.simcloud.scenarios.harness`: harness environments of the
  DatabaseInstance kind (the ``lifecycle.environments`` entry point ``simcloud``).
- :mod:`~lifecycle.providers.simcloud.scenarios.demo` and
  :mod:`~lifecycle.providers.simcloud.scenarios.claims_demo`: the ``managed`` and
  ``claims`` demos (the ``lifecycle.demos`` entry points).
- :mod:`~lifecycle.providers.simcloud.scenarios.verify`: the crash explorer's targets,
  named by the kinds' registrations.

These modules use the harness and the crash explorer; the provider's own modules never
import them.
"""
