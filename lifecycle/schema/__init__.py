"""CustomResourceDefinitions from kinds, and the checks a real API server applies to them.

:mod:`~lifecycle.schema.openapi` maps the Python types a kind's parameters
declare to OpenAPI v3 schemas; :mod:`~lifecycle.schema.crds` builds a kind's
CRD from them; :mod:`~lifecycle.schema.structural` reports what would make an
API server refuse a CRD. All three are pure: they read kinds from
:mod:`lifecycle.core` and import nothing else of the package, so the operator
(:mod:`lifecycle.driver`), the embedded API (:mod:`lifecycle.sim`) and the
harness (:mod:`lifecycle.testing`) use them side by side.
"""
