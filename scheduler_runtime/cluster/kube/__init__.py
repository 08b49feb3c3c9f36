"""The real API server backend, one module per concern (see each module's docstring for the upstream file):

- `resources`: resource references, the built-in table, metav1 time formats;
- `kubeconfig`: kubeconfig / in-cluster loading into a `Connection` (`KubeConfigError`);
- `rest`: `KubeClient`, the REST client with retries and a token bucket, and the `ApiError` family;
- `http11`: the lean keep-alive HTTP/1.1 pool `KubeClient.request` uses (watches stay on urllib3);
- `reflector`: list + watch into raw-dict stores (the informers);
- `events`: events.k8s.io/v1 recording aggregated into EventSeries;
- `status`: PodScheduled condition, nominatedNodeName and annotation writes;
- `binder`: the binding and the deletion of preemption victims;
- `backend`: `KubeCluster`, which assembles them (preflight, discovery, start, the leader-gated write).

Dependencies point down that list (`backend` imports the others; `resources` imports none of them). This
package re-exports the names the rest of the tree imports from `scheduler_runtime.cluster.kube`.
"""

from __future__ import annotations

from .backend import DRA_PERMISSIONS, REQUIRED_PERMISSIONS, KubeCluster
from .events import (
    EVENT_CACHE_SIZE,
    EVENT_MAX_TRIES,
    EVENT_RETRY_SLEEP,
    EVENT_SERIES_FINISH_TIME,
    EVENT_SERIES_REFRESH_TIME,
    NOTE_LENGTH_LIMIT,
    EventWriter,
)
from .kubeconfig import (
    Connection,
    KubeConfigError,
    _read_kubeconfig_file,
    check_kubeconfig,
    find_kubeconfig,
    in_cluster,
    load_connection,
)
from .reflector import Reflector
from .resources import BUILTIN, CORE_RESOURCES, POD_FIELD_SELECTOR, ResourceRef, micro_time, parse_resource, rfc3339
from .rest import (
    USER_AGENT,
    ApiError,
    ApiForbiddenError,
    ApiUnauthorizedError,
    ApiUnreachableError,
    KubeClient,
    Response,
    _conn_error_text,
    describe_request,
    error_from_response,
    too_large_resource_version,
)
from .status import PodWriter

#: the names these classes had when the backend was one module (tests import them)
_EventWriter = EventWriter
_PodWriter = PodWriter

__all__ = [
    "BUILTIN", "CORE_RESOURCES", "DRA_PERMISSIONS", "EVENT_CACHE_SIZE", "EVENT_MAX_TRIES", "EVENT_RETRY_SLEEP",
    "EVENT_SERIES_FINISH_TIME", "EVENT_SERIES_REFRESH_TIME", "NOTE_LENGTH_LIMIT", "POD_FIELD_SELECTOR",
    "REQUIRED_PERMISSIONS", "USER_AGENT", "ApiError", "ApiForbiddenError", "ApiUnauthorizedError",
    "ApiUnreachableError", "Connection", "EventWriter", "KubeClient", "KubeCluster", "KubeConfigError",
    "PodWriter", "Reflector", "ResourceRef", "Response", "_EventWriter", "_PodWriter", "_conn_error_text",
    "_read_kubeconfig_file", "check_kubeconfig", "describe_request", "error_from_response", "find_kubeconfig",
    "in_cluster", "load_connection", "micro_time", "parse_resource", "rfc3339", "too_large_resource_version",
]
