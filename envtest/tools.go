//go:build tools

// Package tools pins the commands the envtest tier builds, so that go mod tidy
// keeps what they need: the API server, and the controller manager that runs
// its garbage collector and namespace controller.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
)
