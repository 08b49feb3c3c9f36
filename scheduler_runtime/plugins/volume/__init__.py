"""The volume plugins, one module each as in kube-scheduler's pkg/scheduler/framework/plugins (v1.36):
VolumeBinding, VolumeRestrictions, VolumeZone and NodeVolumeLimits, plus `volumeutil`, the claim/PV/
StorageClass/CSINode lookups and wording they share."""
