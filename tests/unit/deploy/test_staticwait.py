"""`deploy --static-pod --wait`: reading the mirror pod the kubelet keeps in the API (shapes as kubelet v1.36
writes them: the crash loop one is from a ksched container that exited at start-up under a real kubelet)."""

from __future__ import annotations

from typing import Any

import pytest

from ksched_cli.deploy import staticwait

IMAGE = "localhost/ksched:v1"


def _pod(image: str = IMAGE, **status: Any) -> dict[str, Any]:
    return {"spec": {"containers": [{"name": "kube-scheduler", "image": image}]},
            "status": {"containerStatuses": [{"name": "kube-scheduler", **status}]} if status else {}}


CRASH = _pod(ready=False, restartCount=1, state={"waiting": {"reason": "CrashLoopBackOff", "message":
                                                             "back-off 10s restarting failed container"}},
             lastState={"terminated": {"exitCode": 1, "reason": "Error"}})


@pytest.mark.parametrize(("pod", "phase"), [
    (None, "absent"),
    (_pod("registry.k8s.io/kube-scheduler:v1.36.3", ready=True), "old"),
    (_pod(), "starting"),
    (_pod(ready=False, restartCount=0, state={"running": {}}), "starting"),
    (_pod(ready=True, restartCount=0, state={"running": {}}), "ready"),
    (CRASH, "crashloop"),
    (_pod(ready=False, restartCount=2, state={"running": {}}), "crashloop"),
    # restarted twice after clean exits while the kubelet swapped the static pod: not a crash loop
    (_pod(ready=False, restartCount=2, state={"running": {}},
          lastState={"terminated": {"exitCode": 0, "reason": "Completed"}}), "starting"),
    (_pod(ready=False, restartCount=2, state={"running": {}},
          lastState={"terminated": {"exitCode": 1, "reason": "Error"}}), "crashloop"),
    (_pod(ready=False, state={"waiting": {"reason": "ErrImageNeverPull", "message": "not present"}}), "stuck"),
])
def test_classify(pod: dict[str, Any] | None, phase: str) -> None:
    assert staticwait.classify(pod, "kube-scheduler", IMAGE).phase == phase


def test_crash_loop_is_reported_at_once_with_the_last_exit_and_log() -> None:
    seen: list[str] = []
    with pytest.raises(staticwait.StaticPodFailed) as e:
        staticwait.wait(lambda: CRASH, "kube-scheduler", IMAGE, 3600, lambda s: seen.append(s.phase),
                        logs=lambda: "E unknown plugin NotInImage")
    msg = str(e.value)
    assert "crash-looping (CrashLoopBackOff, 1 restarts, last exit code 1 (Error))" in msg
    assert msg.endswith("its log ends: E unknown plugin NotInImage") and seen == ["crashloop"]
    assert e.value.exit_code == 1


def test_timeout_names_the_last_state() -> None:
    with pytest.raises(staticwait.StaticPodFailed, match="not ready after 0 s .the mirror pod still runs old"):
        staticwait.wait(lambda: _pod("old"), "kube-scheduler", IMAGE, 0.0, interval=0)
