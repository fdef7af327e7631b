"""The seam to Kubernetes: the API error taxonomy, object helpers, label
selectors, resource types, the conflict-retry helper and the ``Cluster``
protocol that every API implementation (the official client's adapter, the
embedded API) satisfies. Imports nothing of lifecycle's."""
