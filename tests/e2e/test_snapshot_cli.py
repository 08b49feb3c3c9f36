"""`ksched snapshot` and `simulate --snapshot` on bad input: one line, the right exit code, nothing written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


def test_output_is_a_format(ksched: Any, tmp_path: Path) -> None:
    r = ksched("snapshot", "-o", str(tmp_path / "snap.yaml"))
    assert r.returncode == 2 and "allowed: yaml, json" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "snap.yaml").exists()


def test_unreadable_kubeconfig_one_line(ksched: Any, tmp_path: Path) -> None:
    out = tmp_path / "snap.yaml"
    r = ksched("snapshot", "--kubeconfig", str(tmp_path / "nope"), "--write-to", str(out))
    assert r.returncode == 2, r.stderr
    assert str(tmp_path / "nope") in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and not out.exists()


def test_unreachable_server_fails_without_writing(ksched: Any, tmp_path: Path) -> None:
    kc = tmp_path / "kc"
    kc.write_text("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: 'https://127.0.0.1:9'}\n"
                  "contexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\nusers:\n- name: u\n"
                  "  user: {token: t}\n")
    out = tmp_path / "snap.yaml"
    r = ksched("snapshot", "--kubeconfig", str(kc), "--context", "x", "--write-to", str(out))
    assert r.returncode == 1 and "cannot reach the API server at https://127.0.0.1:9" in r.stderr, r.stderr
    assert not out.exists() and "Traceback" not in r.stderr
    r = ksched("snapshot", "--kubeconfig", str(kc), "--context", "nosuch")
    assert r.returncode != 0 and "nosuch" in r.stderr and "Traceback" not in r.stderr


def test_snapshot_with_nothing_to_schedule_says_so(ksched: Any) -> None:
    r = ksched("simulate", "--snapshot", str(REPO / "examples" / "cluster"))
    assert r.returncode == 0, r.stderr
    assert "nothing to schedule" in r.stderr and "shop/batch-1" not in r.stdout
