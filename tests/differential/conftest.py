"""The differential test starts its own control plane: nodes are cluster-scoped and its FailedScheduling
messages count every node, so no other test's nodes may be there."""
