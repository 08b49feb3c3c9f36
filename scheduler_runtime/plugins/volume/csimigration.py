"""In-tree volume plugins migrated to CSI drivers: which volumes they cover and how a volume translates.

Facts from k8s.io/csi-translation-lib v0.36.3 (translate.go, plugins/*.go) and kube-scheduler v1.36.3
nodevolumelimits/utils.go, for what the scheduler needs of a translation: the CSI driver a volume is counted
against and its volume handle (two volumes with the same driver/handle are one attachment).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

#: the CSINode annotation listing the in-tree plugins its node migrated (v1.MigratedPluginsAnnotationKey)
ANN_MIGRATED_PLUGINS = "storage.alpha.kubernetes.io/migrated-plugins"

_ZONE_BETA = "failure-domain.beta.kubernetes.io/zone"
_ZONE = "topology.kubernetes.io/zone"
_EBS_VOLUME = re.compile(r"^vol-[^/]*$")


class TranslationError(Exception):
    """The translation library refuses the volume (its error text)."""


@dataclass(frozen=True, slots=True)
class InTreePlugin:
    #: the volume source's key in a Volume / PersistentVolumeSpec
    source: str
    #: the in-tree plugin name (kubernetes.io/...)
    plugin: str
    #: the CSI driver it migrates to
    driver: str


PLUGINS = (
    InTreePlugin("gcePersistentDisk", "kubernetes.io/gce-pd", "pd.csi.storage.gke.io"),
    InTreePlugin("awsElasticBlockStore", "kubernetes.io/aws-ebs", "ebs.csi.aws.com"),
    InTreePlugin("cinder", "kubernetes.io/cinder", "cinder.csi.openstack.org"),
    InTreePlugin("azureDisk", "kubernetes.io/azure-disk", "disk.csi.azure.com"),
    InTreePlugin("azureFile", "kubernetes.io/azure-file", "file.csi.azure.com"),
    InTreePlugin("vsphereVolume", "kubernetes.io/vsphere-volume", "csi.vsphere.vmware.com"),
    InTreePlugin("portworxVolume", "kubernetes.io/portworx-volume", "pxd.portworx.com"),
)
_BY_PLUGIN = {p.plugin: p for p in PLUGINS}

#: isCSIMigrationOn: the plugins kube-scheduler counts as migrated whenever the node has a CSINode
#: (Azure File and vSphere are migratable but not counted)
COUNTED = frozenset({"kubernetes.io/aws-ebs", "kubernetes.io/portworx-volume", "kubernetes.io/gce-pd",
                     "kubernetes.io/azure-disk", "kubernetes.io/cinder"})


def plugin_of(source: dict[str, Any] | None) -> InTreePlugin | None:
    """The migratable in-tree plugin of an inline volume or a PV spec (IsInlineMigratable / IsPVMigratable)."""
    if not isinstance(source, dict):
        return None
    for p in PLUGINS:
        if isinstance(source.get(p.source), dict):
            return p
    return None


def plugin_by_name(name: str) -> InTreePlugin | None:
    """IsMigratableIntreePluginByName (a StorageClass provisioner)."""
    return _BY_PLUGIN.get(name)


def migration_on(has_csinode: bool, plugin: str) -> bool:
    """isCSIMigrationOn as kube-scheduler 1.36.3 decides it: the node has a CSINode and the plugin is one of
    those migrated for good (the CSINode's migrated-plugins annotation is not consulted)."""
    return has_csinode and plugin in COUNTED


def _ebs_handle(volume_id: str) -> str:
    if not volume_id.startswith("aws://"):
        return volume_id
    try:
        url = urlsplit(volume_id)
        url.port  # noqa: B018 - Go's url.Parse refuses a malformed port
    except ValueError as exc:
        raise TranslationError(f"failed to translate Kubernetes ID to EBS Volume ID Invalid disk name "
                               f"({volume_id}): {exc}") from exc
    handle = url.path.strip("/")
    if not _EBS_VOLUME.match(handle):
        raise TranslationError(f"failed to translate Kubernetes ID to EBS Volume ID Invalid format for AWS volume "
                               f"({volume_id})")
    return handle


def _azure_disk(src: dict[str, Any]) -> str:
    kind = src.get("kind")
    if kind is not None and str(kind).lower() != "managed":
        raise TranslationError(f"kind({kind}) is not supported in csi migration")
    return str(src.get("diskURI") or "")


def _gce_pv_handle(pv: dict[str, Any], pd_name: str) -> str:
    labels = (pv.get("metadata") or {}).get("labels") or {}
    zones = (labels.get(_ZONE_BETA) or labels.get(_ZONE) or "").split("__")
    if len(zones) == 1 and zones[0]:
        return f"projects/UNSPECIFIED/zones/{zones[0]}/disks/{pd_name}"
    if len(zones) > 1:
        regions = set()
        for z in zones:
            parts = z.split("-")
            if len(parts) != 3:
                raise TranslationError(f"failed to get region from zones: zone in unexpected format, expected: "
                                       f"{{locale}}-{{region}}-{{zone}}, got: {z}")
            regions.add("-".join(parts[:2]))
        if len(regions) != 1:
            raise TranslationError("failed to get region from zones: multiple or no regions gotten from zones")
        return f"projects/UNSPECIFIED/regions/{regions.pop()}/disks/{pd_name}"
    return f"projects/UNSPECIFIED/zones/UNSPECIFIED/disks/{pd_name}"


def inline_handle(plugin: InTreePlugin, volume: dict[str, Any], namespace: str) -> str:
    """TranslateInTreeInlineVolumeToCSI's volume handle for an inline volume of `plugin`."""
    src = volume.get(plugin.source) or {}
    if plugin.source == "awsElasticBlockStore":
        return _ebs_handle(str(src.get("volumeID") or ""))
    if plugin.source == "gcePersistentDisk":
        return f"projects/UNSPECIFIED/zones/UNSPECIFIED/disks/{src.get('pdName') or ''}"
    if plugin.source == "azureDisk":
        return _azure_disk(src)
    if plugin.source == "azureFile":
        secret = str(src.get("secretName") or "")
        m = re.search(r"azure-storage-account-(.+)-secret", secret)
        account = m.group(1) if m else secret
        return f"#{account}#{src.get('shareName') or ''}#{volume.get('name') or ''}#{namespace or 'default'}"
    if plugin.source == "vsphereVolume":
        return str(src.get("volumePath") or "")
    return str(src.get("volumeID") or "")  # cinder, portworx


def pv_handle(plugin: InTreePlugin, pv: dict[str, Any]) -> str:
    """TranslateInTreePVToCSI's volume handle for a PersistentVolume of `plugin` (the counted plugins)."""
    src = (pv.get("spec") or {}).get(plugin.source) or {}
    if plugin.source == "awsElasticBlockStore":
        return _ebs_handle(str(src.get("volumeID") or ""))
    if plugin.source == "gcePersistentDisk":
        return _gce_pv_handle(pv, str(src.get("pdName") or ""))
    if plugin.source == "azureDisk":
        return _azure_disk(src)
    if plugin.source == "vsphereVolume":
        return str(src.get("volumePath") or "")
    return str(src.get("volumeID") or "")  # cinder, portworx
