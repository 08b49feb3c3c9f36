"""Every template ships in the wheel: pyproject's data-files must list each file under templates/."""

from __future__ import annotations

import tomllib
from pathlib import Path

from scheduler_runtime.resources import SOURCE_TEMPLATES, templates_dir

ROOT = Path(__file__).resolve().parents[2]


def test_data_files_cover_every_template() -> None:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["data-files"]
    shipped = {f for files in data.values() for f in files}
    for dest, files in data.items():
        for f in files:
            assert dest == "share/ksched/" + str(Path(f).parent), f"{f} would land in {dest}"
    on_disk = {str(p.relative_to(ROOT)) for p in (ROOT / "templates").rglob("*") if p.is_file()}
    assert on_disk == shipped, f"missing from data-files: {on_disk - shipped}; stale: {shipped - on_disk}"


def test_templates_found_in_a_checkout() -> None:
    assert templates_dir() == SOURCE_TEMPLATES and (templates_dir() / "plugin" / "plugin.py.j2").is_file()


def test_the_wheel_ksched_build_makes_carries_the_templates(tmp_path: Path) -> None:
    import zipfile

    from ksched_cli.imagebuild.wheels import build_from_source

    whl = build_from_source(ROOT, tmp_path, lambda _msg: None)
    names = zipfile.ZipFile(whl).namelist()
    for t in ("plugin/plugin.py.j2", "deploy/deployment.yaml.j2", "config/kube-scheduler-config.yaml.j2",
              "Dockerfile.j2"):
        assert any(n.endswith(f"/share/ksched/templates/{t}") for n in names), t
