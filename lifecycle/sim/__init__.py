"""A simulated Kubernetes: the embedded API server, its fault injection, and
the HTTP face the official client talks to."""
