"""Scheduler extenders: HTTP(S) webhooks that filter, prioritize, bind and pick preemption victims.

Follows kube-scheduler v1.36.3 (k8s.io/kubernetes@v1.36.3):
  * pkg/scheduler/extender.go          -- HTTPExtender (wire calls, nodeCacheCapable, IsInterested, timeouts)
  * pkg/scheduler/schedule_one.go      -- findNodesThatPassExtenders, prioritizeNodes (extender part,
                                          score x weight x MaxNodeScore/MaxExtenderPriority), extendersBinding
  * pkg/scheduler/scheduler.go         -- buildExtenders (ignorable ones last, ignoredByScheduler resources)
  * pkg/scheduler/framework/preemption/preemption.go -- callExtenders (ProcessPreemption)
  * pkg/scheduler/apis/config/validation/validation.go -- validateExtenders
  * k8s.io/kube-scheduler@v0.36.3 config/v1 Extender types and extender/v1 wire types
  * k8s.io/client-go@v0.36.3 transport.TLSConfigFor (TLS rules)

`config` decodes, validates and renders the `extenders:` list; `client` is one extender over HTTP(S);
`runner` applies them at kube-scheduler's positions in the scheduling and binding cycles.
"""

from .config import ExtenderConfig, decode_extenders, render_extenders
from .runner import ExtenderSet, build_extender_set

__all__ = ["ExtenderConfig", "ExtenderSet", "build_extender_set", "decode_extenders", "render_extenders"]
