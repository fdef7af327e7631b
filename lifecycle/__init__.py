"""lifecycle: explicit, validated state machines for Kubernetes managed resources.

Modules: :mod:`lifecycle.machine` (declaring and compiling machines),
:mod:`lifecycle.decide` (the pure event choice and requeue matrix),
:mod:`lifecycle.reconciler` (the generic reconciler), :mod:`lifecycle.kind`,
:mod:`lifecycle.client` (the external client contract),
:mod:`lifecycle.apiserver` (the embedded Kubernetes API) and
:mod:`lifecycle.testing` (the harness and pytest plugin).
"""
