//go:build tools

// Package tools pins the control-plane binaries ksched's integration tests run: kube-apiserver,
// kube-scheduler and kube-controller-manager (its resourceclaim controller) from k8s.io/kubernetes, and etcd at
// the version that Kubernetes release uses.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
