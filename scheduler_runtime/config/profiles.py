"""What a config's profile names mean for the pods a user creates."""

from __future__ import annotations

from typing import Any

DEFAULT_SCHEDULER = "default-scheduler"


def profile_names(cfg: Any) -> list[str]:
    return [p.scheduler_name for p in cfg.profiles]


def no_default_profile_warning(cfg: Any) -> str | None:
    """One line when no profile is `default-scheduler`: pods that name no scheduler (their
    spec.schedulerName defaults to default-scheduler) are then left for another scheduler and stay Pending."""
    names = profile_names(cfg)
    if DEFAULT_SCHEDULER in names:
        return None
    return (f"no profile is named {DEFAULT_SCHEDULER} (profiles: {', '.join(names)}): pods without "
            f"spec.schedulerName set to one of them stay Pending")


def not_served_message(scheduler_name: str, cfg: Any) -> str:
    """Why a pod whose schedulerName no profile serves was not scheduled (simulate's per-pod line)."""
    return (f"spec.schedulerName is {scheduler_name!r}, which no profile of this config serves "
            f"(profiles: {', '.join(profile_names(cfg))}): left Pending for another scheduler")
