"""One Go-duration parser with time.ParseDuration's rules, shared by flags, config files and leader election."""

from __future__ import annotations

import pytest

from scheduler_runtime.config.loader import parse_duration
from scheduler_runtime.errors import UsageError
from scheduler_runtime.goduration import format_ns, parse_ns
from scheduler_runtime.leaderelection import seconds
from scheduler_runtime.options.flags import parse_go_duration

H = 3600 * 10**9


@pytest.mark.parametrize(("text", "ns"), [
    ("0", 0), ("-0", 0), ("+0", 0), ("0s", 0), ("300ms", 300 * 10**6), ("-1.5h", -H * 3 // 2),
    ("2h45m", 2 * H + 45 * 60 * 10**9), ("1.5s", 1_500_000_000), (".5s", 500_000_000), ("5.s", 5 * 10**9),
    ("1us", 1000), ("1\u00b5s", 1000), ("1\u03bcs", 1000), ("3ns", 3), ("1h1m1s1ms1us1ns", H + 61_001_001_001),
    ("2562047h47m16.854775807s", 2**63 - 1), ("-2562047h47m16.854775808s", -(2**63)),
    ("0.0000000001s", 0), ("1.0000000001s", 10**9),
])
def test_valid_durations(text: str, ns: int) -> None:
    assert parse_ns(text) == ns


@pytest.mark.parametrize(("text", "message"), [
    ("15", 'time: missing unit in duration "15"'),
    ("1h0", 'time: missing unit in duration "1h0"'),
    ("", 'time: invalid duration ""'),
    ("-", 'time: invalid duration "-"'),
    (".s", 'time: invalid duration ".s"'),
    ("s", 'time: invalid duration "s"'),
    ("1x", 'time: unknown unit "x" in duration "1x"'),
    ("1 s", 'time: unknown unit " s" in duration "1 s"'),
    ("--1s", 'time: invalid duration "--1s"'),
    ("2562047h47m16.854775808s", 'time: invalid duration "2562047h47m16.854775808s"'),
    ("2562048h", 'time: invalid duration "2562048h"'),
    ("9" * 5000 + "s", None),
    ("1e3s", 'time: unknown unit "e" in duration "1e3s"'),
])
def test_invalid_durations(text: str, message: str | None) -> None:
    with pytest.raises(ValueError) as info:
        parse_ns(text)
    if message is not None:
        assert str(info.value) == message


def test_the_three_callers_agree_on_a_bare_number() -> None:
    """Used to be: config loader nanoseconds, leader election seconds, flags "invalid duration"."""
    with pytest.raises(UsageError, match='missing unit in duration "15"'):
        parse_go_duration("15", "leader-elect-lease-duration")
    with pytest.raises(ValueError, match="missing unit"):
        seconds("15")
    with pytest.raises(ValueError, match="missing unit"):
        parse_duration("15")
    with pytest.raises(ValueError, match="cannot unmarshal number into Go value of type string"):
        parse_duration(15)  # a YAML number in a metav1.Duration field: a decoding error in kube-scheduler
    assert parse_duration("1m30s") == seconds("1m30s") == parse_go_duration("1m30s", "x") == 90.0


def test_leader_election_takes_python_numbers_as_seconds() -> None:
    assert seconds(15) == 15.0 and seconds(2.5) == 2.5
    with pytest.raises(ValueError):
        seconds(True)


def test_a_bad_duration_is_a_config_error_even_with_leader_election_off(tmp_path) -> None:
    """kube decodes metav1.Duration before looking at leaderElect; this was an internal error (ValueError)."""
    from scheduler_runtime.config import ConfigError, load_config
    from scheduler_runtime.plugins.registry import build_registry

    f = tmp_path / "c.yaml"
    f.write_text("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
                 "leaderElection: {leaderElect: false, leaseDuration: '15'}\n")
    with pytest.raises(ConfigError) as info:
        load_config(f, build_registry([]))
    assert str(info.value) == (f'{f}: leaderElection.leaseDuration: Invalid value: "15": '
                               'time: missing unit in duration "15"')


@pytest.mark.parametrize(("ns", "text"), [
    (0, "0s"), (1, "1ns"), (1_500, "1.5\u00b5s"), (500_000_000, "500ms"), (999_999_999, "999.999999ms"),
    (10**9, "1s"), (1_000_000_001, "1.000000001s"), (90 * 10**9, "1m30s"), (600 * 10**9, "10m0s"),
    (H + 500_000_000, "1h0m0.5s"), (-1_500_000_000, "-1.5s"), ((1 << 63) - 1, "2562047h47m16.854775807s")])
def test_durations_print_as_go_does(ns: int, text: str) -> None:
    """metav1.Duration's form (Go's Duration.String), which parses back to the same value: a 1ns filterTimeout
    is written "1ns", not a float."""
    assert format_ns(ns) == text
    assert parse_ns(text) == ns
