"""kube-scheduler's `--feature-gates`: the gates kube-scheduler 1.36.3 lists in its --help, and which ksched honours.

kube's rules are followed for the syntax: `Name=bool` pairs separated by commas, an optional `kube:` prefix used
consistently, repeated flags merged, `unrecognized feature gate: X` for an unknown name, strconv.ParseBool's
error for a bad value. A drop-in must not accept a gate and ignore it, so any gate set to a value other than
its 1.36 default is refused unless ksched implements both settings (`HONOURED`): the
scheduling gates change behaviour ksched does not switch, and the others (kubelet, API server) have no
effect on a scheduler, but ksched cannot tell the two apart for every gate and refuses rather than guess.
GA gates locked to their value (e.g. SidecarContainers) are not in kube's --help and are refused as unknown.
"""

from __future__ import annotations

from .errors import UsageError

#: name -> (default, stage) as `kube-scheduler --help` of v1.36.3 lists them
KUBE_1_36: dict[str, tuple[bool, str]] = {
    "APIResponseCompression": (True, "BETA"),
    "APIServerIdentity": (True, "BETA"),
    "APIServingWithRoutine": (False, "ALPHA"),
    "AllAlpha": (False, "ALPHA"),
    "AllBeta": (False, "BETA"),
    "AllowParsingUserUIDFromCertAuth": (True, "BETA"),
    "AllowUnsafeMalformedObjectDeletion": (False, "ALPHA"),
    "AtomicFIFO": (True, "BETA"),
    "AuthorizePodWebsocketUpgradeCreatePermission": (True, "BETA"),
    "CBORServingAndStorage": (False, "ALPHA"),
    "CPUManagerPolicyAlphaOptions": (False, "ALPHA"),
    "CPUManagerPolicyBetaOptions": (True, "BETA"),
    "CRDObservedGenerationTracking": (True, "BETA"),
    "CRIListStreaming": (False, "ALPHA"),
    "CSIVolumeHealth": (False, "ALPHA"),
    "ClearingNominatedNodeNameAfterBinding": (True, "BETA"),
    "ClientsAllowCARotation": (True, "BETA"),
    "ClientsAllowCBOR": (False, "ALPHA"),
    "ClientsAllowTLSCacheGC": (True, "BETA"),
    "ClientsPreferCBOR": (False, "ALPHA"),
    "CloudControllerManagerWatchBasedRoutesReconciliation": (False, "ALPHA"),
    "CloudControllerManagerWebhook": (False, "ALPHA"),
    "ClusterTrustBundle": (False, "BETA"),
    "ClusterTrustBundleProjection": (False, "BETA"),
    "ComponentFlagz": (True, "BETA"),
    "ComponentStatusz": (True, "BETA"),
    "ConcurrentWatchObjectDecode": (False, "BETA"),
    "ConstrainedImpersonation": (True, "BETA"),
    "ContainerCheckpoint": (True, "BETA"),
    "ContainerRestartRules": (True, "BETA"),
    "ContainerStopSignals": (False, "ALPHA"),
    "ContextualLogging": (True, "BETA"),
    "CoordinatedLeaderElection": (False, "BETA"),
    "CrossNamespaceVolumeDataSource": (False, "ALPHA"),
    "DRAConsumableCapacity": (True, "BETA"),
    "DRADeviceBindingConditions": (True, "BETA"),
    "DRADeviceTaintRules": (False, "BETA"),
    "DRADeviceTaints": (True, "BETA"),
    "DRAExtendedResource": (True, "BETA"),
    "DRAListTypeAttributes": (False, "ALPHA"),
    "DRANodeAllocatableResources": (False, "ALPHA"),
    "DRAPartitionableDevices": (True, "BETA"),
    "DRAResourceClaimDeviceStatus": (True, "BETA"),
    "DRAResourceClaimGranularStatusAuthorization": (True, "BETA"),
    "DRAResourcePoolStatus": (False, "ALPHA"),
    "DRASchedulerFilterTimeout": (True, "BETA"),
    "DRAWorkloadResourceClaims": (False, "ALPHA"),
    "DeclarativeValidationBeta": (True, "BETA"),
    "DeploymentReplicaSetTerminatingReplicas": (True, "BETA"),
    "DetectCacheInconsistency": (True, "BETA"),
    "EnvFiles": (True, "BETA"),
    "EventedPLEG": (False, "ALPHA"),
    "ExtendWebSocketsToKubelet": (True, "BETA"),
    "GangScheduling": (False, "ALPHA"),
    "GenericWorkload": (False, "ALPHA"),
    "GracefulNodeShutdown": (True, "BETA"),
    "GracefulNodeShutdownBasedOnPodPriority": (True, "BETA"),
    "HPAConfigurableTolerance": (True, "BETA"),
    "HPAScaleToZero": (False, "ALPHA"),
    "HostnameOverride": (True, "BETA"),
    "ImageVolumeWithDigest": (False, "ALPHA"),
    "InOrderInformersBatchProcess": (True, "BETA"),
    "InPlacePodLevelResourcesVerticalScaling": (True, "BETA"),
    "InPlacePodVerticalScalingExclusiveCPUs": (False, "ALPHA"),
    "InPlacePodVerticalScalingExclusiveMemory": (False, "ALPHA"),
    "InPlacePodVerticalScalingInitContainers": (True, "BETA"),
    "KubeletCrashLoopBackOffMax": (True, "BETA"),
    "KubeletEnsureSecretPulledImages": (True, "BETA"),
    "KubeletInUserNamespace": (False, "ALPHA"),
    "KubeletSeparateDiskGC": (True, "BETA"),
    "KubeletServiceAccountTokenForCredentialProviders": (True, "BETA"),
    "ListFromCacheSnapshot": (True, "BETA"),
    "LocalStorageCapacityIsolationFSQuotaMonitoring": (False, "BETA"),
    "LoggingAlphaOptions": (False, "ALPHA"),
    "LoggingBetaOptions": (True, "BETA"),
    "ManifestBasedAdmissionControlConfig": (False, "ALPHA"),
    "MatchLabelKeysInPodTopologySpread": (True, "BETA"),
    "MatchLabelKeysInPodTopologySpreadSelectorMerge": (True, "BETA"),
    "MaxUnavailableStatefulSet": (False, "BETA"),
    "MemoryQoS": (False, "ALPHA"),
    "MutablePVNodeAffinity": (False, "ALPHA"),
    "MutablePodResourcesForSuspendedJobs": (True, "BETA"),
    "MutableSchedulingDirectivesForSuspendedJobs": (True, "BETA"),
    "NativeHistograms": (False, "ALPHA"),
    "NodeDeclaredFeatures": (True, "BETA"),
    "NominatedNodeNameForExpectation": (True, "BETA"),
    "OpenAPIEnums": (True, "BETA"),
    "OpportunisticBatching": (True, "BETA"),
    "PLEGOnDemandRelist": (True, "BETA"),
    "PersistentVolumeClaimUnusedSinceTime": (False, "ALPHA"),
    "PodAndContainerStatsFromCRI": (False, "ALPHA"),
    "PodCertificateRequest": (False, "BETA"),
    "PodDeletionCost": (True, "BETA"),
    "PodLevelResourceManagers": (False, "ALPHA"),
    "PodLevelResources": (True, "BETA"),
    "PodLogsQuerySplitStreams": (False, "ALPHA"),
    "PodReadyToStartContainersCondition": (True, "BETA"),
    "PodTopologyLabelsAdmission": (True, "BETA"),
    "PodsAPI": (False, "ALPHA"),
    "PortForwardWebsockets": (True, "BETA"),
    "PreventStaticPodAPIReferences": (True, "BETA"),
    "QOSReserved": (False, "ALPHA"),
    "ReduceDefaultCrashLoopBackOffDecay": (False, "ALPHA"),
    "RelaxedServiceNameValidation": (True, "BETA"),
    "ReloadKubeletClientCAFile": (True, "BETA"),
    "ReloadKubeletServerCertificateFile": (True, "BETA"),
    "RemoteRequestHeaderUID": (True, "BETA"),
    "ResourceHealthStatus": (True, "BETA"),
    "ResourceHealthStatusMessage": (True, "BETA"),
    "RestartAllContainersOnContainerExits": (True, "BETA"),
    "RotateKubeletServerCertificate": (True, "BETA"),
    "RuntimeClassInImageCriApi": (False, "ALPHA"),
    "SELinuxMount": (False, "BETA"),
    "SchedulerAsyncAPICalls": (False, "BETA"),
    "SchedulerAsyncPreemption": (True, "BETA"),
    "SchedulerPopFromBackoffQ": (True, "BETA"),
    "ServiceAccountNodeAudienceRestriction": (True, "BETA"),
    "ShardedListAndWatch": (False, "ALPHA"),
    "SizeBasedListCostEstimate": (True, "BETA"),
    "StaleControllerConsistencyDaemonSet": (True, "BETA"),
    "StaleControllerConsistencyJob": (True, "BETA"),
    "StaleControllerConsistencyReplicaSet": (True, "BETA"),
    "StaleControllerConsistencyStatefulSet": (True, "BETA"),
    "StatefulSetSemanticRevisionComparison": (True, "BETA"),
    "StorageCapacityScoring": (False, "ALPHA"),
    "StorageVersionAPI": (False, "ALPHA"),
    "StorageVersionHash": (True, "BETA"),
    "StorageVersionMigrator": (False, "BETA"),
    "StrictIPCIDRValidation": (True, "BETA"),
    "StructuredAuthenticationConfigurationEgressSelector": (True, "BETA"),
    "StructuredAuthenticationConfigurationJWKSMetrics": (True, "BETA"),
    "TaintTolerationComparisonOperators": (False, "ALPHA"),
    "TokenRequestServiceAccountUIDValidation": (True, "BETA"),
    "TopologyAwareWorkloadScheduling": (False, "ALPHA"),
    "TopologyManagerPolicyAlphaOptions": (False, "ALPHA"),
    "TopologyManagerPolicyBetaOptions": (True, "BETA"),
    "TranslateStreamCloseWebsocketRequests": (True, "BETA"),
    "UnauthenticatedHTTP2DOSMitigation": (True, "BETA"),
    "UnknownVersionInteroperabilityProxy": (True, "BETA"),
    "UnlockWhileProcessingFIFO": (True, "BETA"),
    "UserNamespacesHostNetworkSupport": (False, "ALPHA"),
    "VolumeLimitScaling": (False, "ALPHA"),
    "WatchCacheInitializationPostStartHook": (True, "BETA"),
    "WatchList": (True, "BETA"),
    "WatchListClient": (True, "BETA"),
    "WindowsCPUAndMemoryAffinity": (False, "ALPHA"),
    "WindowsGracefulNodeShutdown": (True, "BETA"),
    "WorkloadAwarePreemption": (False, "ALPHA"),
    "WorkloadWithJob": (False, "ALPHA"),
}
#: gates whose both settings ksched implements
HONOURED = {"ComponentFlagz", "ComponentStatusz", "DRADeviceTaintRules", "NodeDeclaredFeatures",
            "OpportunisticBatching", "StorageCapacityScoring", "VolumeLimitScaling", "DRAExtendedResource"}
#: non-default values that describe what ksched does anyway: it sizes
#: pod-level resources from the spec alone, as kube does with InPlacePodLevelResourcesVerticalScaling off;
#: the other three change nothing in kube-scheduler 1.36.3 (no code path reads them there), they only have to
#: go off with NodeDeclaredFeatures, which they depend on
MATCHES_KSCHED = {("InPlacePodLevelResourcesVerticalScaling", False),
                  ("ExtendWebSocketsToKubelet", False), ("InPlacePodVerticalScalingInitContainers", False),
                  ("RestartAllContainersOnContainerExits", False)}
#: kube's feature dependencies (pkg/features defaultKubernetesFeatureGateDependencies) on the gates ksched
#: lets a user turn off: gate -> gates it needs enabled
DEPENDENCIES: dict[str, tuple[str, ...]] = {
    "ExtendWebSocketsToKubelet": ("NodeDeclaredFeatures",),
    "InPlacePodLevelResourcesVerticalScaling": ("InPlacePodVerticalScaling", "PodLevelResources",
                                                "NodeDeclaredFeatures"),
    "InPlacePodVerticalScalingInitContainers": ("InPlacePodVerticalScaling", "NodeDeclaredFeatures"),
    "RestartAllContainersOnContainerExits": ("ContainerRestartRules", "NodeDeclaredFeatures"),
    "UserNamespacesHostNetworkSupport": ("UserNamespacesSupport", "NodeDeclaredFeatures"),
}
_TRUE = {"1", "t", "T", "true", "TRUE", "True"}
_FALSE = {"0", "f", "F", "false", "FALSE", "False"}


def parse_feature_gates(values: list[str]) -> dict[str, bool]:
    """The effective gate values (defaults overlaid with `--feature-gates` occurrences)."""
    out = {name: default for name, (default, _stage) in KUBE_1_36.items()}
    prefixed: set[bool] = set()
    for value in values:
        for item in value.split(","):
            item = item.strip()
            if not item:
                continue
            key, eq, val = item.partition("=")
            if not eq:
                raise UsageError(f'--feature-gates: missing bool value for {key}')
            key = key.strip()
            comp, colon, name = key.partition(":")
            if colon:
                if comp != "kube":
                    raise UsageError(f"--feature-gates: unrecognized component {comp!r} in {item!r}: "
                                     "kube-scheduler has only the kube component")
                prefixed.add(True)
            else:
                name = key
                prefixed.add(False)
            if len(prefixed) > 1:
                raise UsageError("--feature-gates: set kube feature gates with default empty prefix or kube: prefix "
                                 "consistently, do not mix use")
            val = val.strip()
            if val in _TRUE:
                b = True
            elif val in _FALSE:
                b = False
            else:
                raise UsageError(f'--feature-gates: invalid value of {name}={val}, err: strconv.ParseBool: parsing '
                                 f'"{val}": invalid syntax')
            if name not in KUBE_1_36:
                raise UsageError(f"--feature-gates: unrecognized feature gate: {name} (ksched knows the gates "
                                 "kube-scheduler 1.36 lists in --help)")
            default, stage = KUBE_1_36[name]
            if b != default and name not in HONOURED and (name, b) not in MATCHES_KSCHED:
                raise UsageError(f"--feature-gates: {name}={str(b).lower()} is not supported by ksched: it implements "
                                 f"kube-scheduler 1.36's default ({name}={str(default).lower()}, {stage}); only "
                                 f"{', '.join(sorted(HONOURED))} can be changed")
            out[name] = b
    _check_dependencies(out)
    return out


def _check_dependencies(gates: dict[str, bool]) -> None:
    """kube's check after setting gates: an enabled gate whose dependencies are off is an error (kube lists
    them in map order; ksched sorts them so the message is stable)."""
    errs = []
    for name in sorted(DEPENDENCIES):
        if gates.get(name, False):
            off = [d for d in DEPENDENCIES[name] if not gates.get(d, True)]
            if off:
                errs.append(f"{name} is enabled, but depends on features that are disabled: [{' '.join(off)}]")
    if errs:
        raise UsageError("--feature-gates: " + (errs[0] if len(errs) == 1 else "[" + ", ".join(errs) + "]"))
