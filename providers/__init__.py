"""Provider implementations: external clients and connectors for managed resource kinds."""
