"""The Go module that builds the envtest tier's real kube-apiserver and etcd.

Installed as ``lifecycle.envtest`` so that :mod:`lifecycle.testing.envtest`
finds ``go.mod``, ``go.sum`` and the sources wherever the package is
installed. There is no Python code here; the folder is data for ``go build``.
"""
