"""The Kubernetes driver: the engine's machines run as a real operator.

See ``docs/driver.md``. The pieces: :mod:`~lifecycle.driver.cluster` (the
official-client adapter), :mod:`~lifecycle.driver.informer`,
:mod:`~lifecycle.driver.queue`, :mod:`~lifecycle.driver.manager`,
:mod:`~lifecycle.driver.leader`, :mod:`~lifecycle.driver.metrics`,
:mod:`~lifecycle.schema.crds` and :mod:`~lifecycle.driver.manifests`.
The commands that start an operator are in :mod:`lifecycle.cli.run`; the
embedded API it can run against is in :mod:`lifecycle.sim`. The driver
imports neither.
"""
