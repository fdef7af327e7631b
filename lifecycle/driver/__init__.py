"""The Kubernetes driver: the engine's machines run as a real operator.

See ``docs/driver.md``. The pieces: :mod:`~lifecycle.driver.cluster` (the
official-client adapter), :mod:`~lifecycle.driver.informer`,
:mod:`~lifecycle.driver.queue`, :mod:`~lifecycle.driver.manager`,
:mod:`~lifecycle.driver.leader`, :mod:`~lifecycle.driver.metrics`,
:mod:`~lifecycle.driver.crds`, :mod:`~lifecycle.driver.manifests`,
:mod:`~lifecycle.sim.http` (the embedded API over HTTP) and
:mod:`~lifecycle.cli.run`.
"""
