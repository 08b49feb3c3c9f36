"""`deploy --static-pod` as root on a node: no writing through symlinks, no folders others may write, and a
rollback that restores only the backups ksched recorded, one step per run, back to the original."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shlex
import shutil
from pathlib import Path
from typing import Any

import pytest
import typer

from ksched_cli.commands.deploy import deploy
from ksched_cli.deploy import files, journal, staticpod
from ksched_cli.guard import error_boundary

REPO = Path(__file__).resolve().parents[3]
MANIFESTS = REPO / "tests" / "data" / "manifests"
IMAGE = "registry.example.com/team/ksched:v1"
CONFIG = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
"""


@pytest.fixture
def node(tmp_path: Path) -> dict[str, Path]:
    etc = tmp_path / "etc-kubernetes"
    (etc / "manifests").mkdir(parents=True)
    m = etc / "manifests" / "kube-scheduler.yaml"
    shutil.copyfile(MANIFESTS / "kubeadm-1.32.yaml", m)
    m.chmod(0o600)
    (tmp_path / "cfg.yaml").write_text(CONFIG)
    return {"root": tmp_path, "etc": etc, "manifests": etc / "manifests", "manifest": m,
            "dest": etc / "ksched-config.yaml", "backups": etc / "ksched-backups", "cfg": tmp_path / "cfg.yaml"}


def _run(**kw: Any) -> tuple[int, str, str]:
    """`ksched deploy` in-process inside the CLI's error boundary; (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            with error_boundary():  # the root group applies it to every command
                deploy(**{"static_pod": True, "yes": True, **kw})
        except typer.Exit as exc:
            code = exc.exit_code
    return code, out.getvalue(), err.getvalue()


def _deploy(node: dict[str, Path], image: str = IMAGE, **kw: Any) -> tuple[int, str, str]:
    args = {"config": node["cfg"], "image": image, "manifest": node["manifest"], "config_dest": node["dest"],
            "backup_dir": node["backups"], **kw}
    return _run(**args)


def _rollback(node: dict[str, Path], **kw: Any) -> tuple[int, str, str]:
    return _run(**{"rollback": True, "manifest": node["manifest"], "config_dest": node["dest"],
                   "backup_dir": node["backups"], **kw})


def _snapshot(root: Path) -> dict[str, Any]:
    return {str(p.relative_to(root)): (os.readlink(p) if p.is_symlink() else p.read_bytes() if p.is_file() else "dir",
                                       p.lstat().st_mode) for p in sorted(root.rglob("*"))}


def _one_error(err: str, *words: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    for w in words:
        assert w in lines[0], (w, lines[0])
    return lines[0]


# ------------------------------------------------------------------------------------------ symlinks


def test_symlinked_manifest_is_refused_not_replaced(node: dict[str, Path]) -> None:
    real = node["root"] / "elsewhere" / "kube-scheduler.yaml"
    real.parent.mkdir()
    node["manifest"].rename(real)
    node["manifest"].symlink_to(real)
    before = _snapshot(node["root"])
    code, _, err = _deploy(node)
    assert code == 2
    _one_error(err, str(node["manifest"]), "is a symlink", f"--manifest {real}")
    assert _snapshot(node["root"]) == before and node["manifest"].is_symlink()


def test_symlinked_config_dest_is_refused(node: dict[str, Path]) -> None:
    target = node["root"] / "real-config.yaml"
    target.write_text("# the admin's file\n")
    node["dest"].symlink_to(target)
    before = _snapshot(node["root"])
    code, _, err = _deploy(node)
    assert code == 2
    _one_error(err, str(node["dest"]), "is a symlink", "--config-dest")
    assert _snapshot(node["root"]) == before


def test_symlinked_backup_folder_is_not_followed(node: dict[str, Path]) -> None:
    elsewhere = node["root"] / "attacker-chosen"
    elsewhere.mkdir(mode=0o700)
    node["backups"].symlink_to(elsewhere)
    before = _snapshot(node["root"])
    for run in (_deploy, _rollback):
        code, _, err = run(node)
        assert code == 2
        _one_error(err, str(node["backups"]), "is a symlink", "--backup-dir")
    assert _snapshot(node["root"]) == before and list(elsewhere.iterdir()) == []


# ------------------------------------------------------------------------------------------ folder modes


def _other_group() -> int:
    if os.geteuid() == 0:
        return 4242
    groups = [g for g in os.getgroups() if g != 0]
    if not groups:
        pytest.skip("needs root or membership of a non-root group to make a group-writable folder")
    return groups[0]


@pytest.mark.parametrize("case", ["manifests o+w", "manifests g+w", "config folder o+w", "ancestor o+w",
                                  "backups o+w"])
def test_folders_others_may_write_are_refused(case: str, node: dict[str, Path]) -> None:
    folder = {"manifests o+w": node["manifests"], "manifests g+w": node["manifests"],
              "config folder o+w": node["dest"].parent, "ancestor o+w": node["etc"],
              "backups o+w": node["backups"]}[case]
    folder.mkdir(exist_ok=True)
    if case == "manifests g+w":
        os.chown(folder, -1, _other_group())
        folder.chmod(0o775)
        mode = "0775"
    else:
        folder.chmod(0o777)
        mode = "0777"
    before = _snapshot(node["root"])
    code, _, err = _deploy(node, dry_run=True)
    assert code == 2
    _one_error(err, str(folder), f"is mode {mode}", "chmod go-w")
    assert _snapshot(node["root"]) == before


def test_safe_modes_are_accepted(node: dict[str, Path]) -> None:
    """Root's group may write (kubeadm's folders are root:root), and a sticky folder above (like /tmp) is fine."""
    if os.geteuid() == 0:
        os.chown(node["manifests"], 0, 0)
        node["manifests"].chmod(0o775)
    node["root"].chmod(0o1777)
    code, out, err = _deploy(node, dry_run=True)
    assert code == 0, err
    assert "dry run: nothing written" in out


# ------------------------------------------------------------------------------------------ journal + rollback


def test_rollback_steps_back_one_recorded_change_per_run(node: dict[str, Path]) -> None:
    original = node["manifest"].read_bytes()
    assert _deploy(node)[0] == 0
    first = node["manifest"].read_bytes()
    first_config = node["dest"].read_bytes()
    node["cfg"].write_text(CONFIG.replace("profiles:", "percentageOfNodesToScore: 50\nprofiles:"))
    assert _deploy(node, image=IMAGE + "-2")[0] == 0
    j = node["backups"] / journal.JOURNAL_NAME
    assert j.stat().st_mode & 0o777 == 0o600
    doc = json.loads(j.read_text())
    assert [e["state"] for e in doc["entries"]] == ["applied", "applied"]
    e0 = doc["entries"][0]
    assert e0["manifest"]["path"] == str(node["manifest"]) and e0["manifest"]["mode"] == 0o600
    assert e0["manifest"]["sha256"] == journal.sha256(original)
    assert e0["manifest"]["written_sha256"] == journal.sha256(first)
    assert e0["config"]["backup"] is None, "ksched installed the config: nothing to back up"
    assert doc["entries"][1]["config"]["sha256"] == journal.sha256(first_config)

    code, out, err = _rollback(node)
    assert code == 0, err
    assert node["manifest"].read_bytes() == first and node["dest"].read_bytes() == first_config
    assert "1 earlier change(s) recorded" in out
    code, out, err = _rollback(node)
    assert code == 0, err
    assert node["manifest"].read_bytes() == original
    assert node["manifest"].stat().st_mode & 0o777 == 0o600
    assert "as it was before ksched first changed it" in out
    code, out, err = _rollback(node)
    assert code == 0 and "nothing to roll back" in out, err
    assert node["manifest"].read_bytes() == original
    assert [e["state"] for e in json.loads(j.read_text())["entries"]] == ["rolled-back", "rolled-back"]


def test_rollback_refuses_a_planted_backup(node: dict[str, Path]) -> None:
    original = node["manifest"].read_bytes()
    assert _deploy(node)[0] == 0
    patched = node["manifest"].read_bytes()
    planted = node["backups"] / "kube-scheduler.yaml.29991231T235959.999999Z.bak"
    planted.write_text(original.decode().replace("kube-scheduler:v1", "evil/miner:latest"))
    code, _, err = _rollback(node)
    assert code == 1
    _one_error(err, str(planted), "not a backup ksched recorded", "move it out")
    assert node["manifest"].read_bytes() == patched, "nothing restored"


def test_rollback_refuses_a_tampered_backup(node: dict[str, Path]) -> None:
    assert _deploy(node)[0] == 0
    patched = node["manifest"].read_bytes()
    (bak,) = files.backups_of(node["manifest"], node["backups"])
    bak.write_bytes(bak.read_bytes() + b"    - --evil=true\n")
    code, _, err = _rollback(node)
    assert code == 1
    _one_error(err, str(bak), "does not match the sha256 recorded")
    assert node["manifest"].read_bytes() == patched
    bak.unlink()
    bak.symlink_to(node["root"] / "cfg.yaml")  # a link in its place is no better
    code, _, err = _rollback(node)
    assert code == 2
    _one_error(err, str(bak), "is a symlink")


def test_rollback_without_journal_refuses_unrecorded_backups(node: dict[str, Path]) -> None:
    node["backups"].mkdir(mode=0o700)
    old = node["backups"] / "kube-scheduler.yaml.20240101T000000.000000Z.bak"
    old.write_text("apiVersion: v1\nkind: Pod\n")
    code, _, err = _rollback(node)
    assert code == 1
    _one_error(err, str(old), "not a backup ksched recorded")


def test_malformed_journal_is_one_line(node: dict[str, Path]) -> None:
    assert _deploy(node)[0] == 0
    j = node["backups"] / journal.JOURNAL_NAME
    doc = json.loads(j.read_text())
    doc["entries"][0]["manifest"]["sha256"] = 5
    j.write_text(json.dumps(doc))
    code, _, err = _rollback(node)
    assert code == 1
    _one_error(err, str(j), "entries[0].manifest.sha256")
    j.write_text("{not json")
    code, _, err = _rollback(node)
    assert code == 2
    _one_error(err, str(j), "not valid JSON")


def test_undo_hint_names_every_flag_and_works(node: dict[str, Path]) -> None:
    original = node["manifest"].read_bytes()
    code, out, err = _deploy(node)
    assert code == 0, err
    (hint,) = [line[len("undo: "):] for line in out.splitlines() if line.startswith("undo: ")]
    argv = shlex.split(hint)
    assert argv[:5] == ["sudo", "ksched", "deploy", "--static-pod", "--rollback"]
    flags = dict(zip(argv[5::2], argv[6::2], strict=True))
    assert flags == {"--manifest": str(node["manifest"]), "--config-dest": str(node["dest"]),
                     "--backup-dir": str(node["backups"])}
    code, _, err = _run(rollback=True, manifest=Path(flags["--manifest"]), config_dest=Path(flags["--config-dest"]),
                        backup_dir=Path(flags["--backup-dir"]))
    assert code == 0, err
    assert node["manifest"].read_bytes() == original


def test_undo_hint_omits_default_locations() -> None:
    from ksched_cli.commands.deploy import undo_command

    assert undo_command(staticpod.DEFAULT_MANIFEST, staticpod.DEFAULT_CONFIG_DEST, staticpod.DEFAULT_BACKUP_DIR) == \
        "sudo ksched deploy --static-pod --rollback"
    assert undo_command(staticpod.DEFAULT_MANIFEST, Path("/etc/ksched/c.yaml"), staticpod.DEFAULT_BACKUP_DIR) == \
        "sudo ksched deploy --static-pod --rollback --config-dest /etc/ksched/c.yaml"


def test_rollback_with_another_config_dest_is_refused(node: dict[str, Path]) -> None:
    assert _deploy(node)[0] == 0
    patched = node["manifest"].read_bytes()
    code, _, err = _rollback(node, config_dest=node["etc"] / "other.yaml")
    assert code == 2
    _one_error(err, "--config-dest", f"pass --config-dest {node['dest']}")
    assert node["manifest"].read_bytes() == patched


def test_a_failed_manifest_write_leaves_no_trace(node: dict[str, Path], registry: Any,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    before = _snapshot(node["root"])
    p = staticpod.plan(node["manifest"], node["cfg"], IMAGE, node["dest"], registry)
    real = files.atomic_write

    def failing(path: Path, data: bytes, mode: int | None = None) -> None:
        if path == node["manifest"]:
            raise OSError(28, "No space left on device", str(path))
        real(path, data, mode)

    monkeypatch.setattr(files, "atomic_write", failing)
    with pytest.raises(OSError):
        staticpod.apply(p, node["backups"])
    after = _snapshot(node["root"])
    assert json.loads((node["backups"] / journal.JOURNAL_NAME).read_text())["entries"] == []
    del after["etc-kubernetes/ksched-backups"], after[f"etc-kubernetes/ksched-backups/{journal.JOURNAL_NAME}"]
    assert after == before, "config, backups and journal entry are undone"


@pytest.fixture(scope="module")
def registry() -> Any:
    from ksched_cli.inputs import registry as _registry

    return _registry(None)
