"""Running machines against a cluster and a provider: the generic reconciler,
the provider contract, claims and owned children. Never imports the embedded
API, the harness or the bundled kinds and providers."""
