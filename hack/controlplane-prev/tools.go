//go:build tools

// Package tools pins the previous minor's kube-scheduler, the oracle ksched's `--emulated-version 1.36`
// parity tests compare against. Only kube-scheduler: a cold CI machine builds nothing else of this release.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
