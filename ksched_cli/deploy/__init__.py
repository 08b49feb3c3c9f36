"""`ksched deploy`: put a ksched scheduler into a cluster, as the static kube-scheduler or beside it.

`staticpod` patches a kubeadm manifest on the control-plane node (files only, no API calls);
`secondsched` renders and server-side-applies a Deployment with its RBAC and ConfigMap;
`rbac` says what a ksched scheduler and its plugins may do beyond `system:kube-scheduler`.
"""
