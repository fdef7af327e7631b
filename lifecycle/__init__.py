"""lifecycle: explicit, validated state machines for Kubernetes managed resources.

Modules: :mod:`lifecycle.core.machine` (declaring and compiling machines),
:mod:`lifecycle.core.decide` (the pure event choice and requeue matrix),
:mod:`lifecycle.runtime.reconciler` (the generic reconciler), :mod:`lifecycle.core.kind`,
:mod:`lifecycle.runtime.contract` (the external client contract),
:mod:`lifecycle.sim.apiserver` (the embedded Kubernetes API) and
:mod:`lifecycle.testing` (the harness and pytest plugin).
"""
