//go:build tools

// Package tools pins the kwok controller that `ksched dev-cluster up --nodes` runs to keep fake nodes Ready
// (heartbeats, leases) and to move bound pods to Running. Its default stage files come from the same module.
package tools

import (
	_ "sigs.k8s.io/kwok/cmd/kwok"
)
