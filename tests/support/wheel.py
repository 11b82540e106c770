"""The project's wheel, built as pip builds it (hatchling, the project's own build config)."""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path

from tests.support.paths import REPO


def build_wheel(workdir: Path) -> Path:
    """Build the wheel into ``workdir/dist``. The build runs on a copy of what the wheel is made
    of, so that a data directory another layer has not populated yet cannot break a test."""
    from hatchling.builders.wheel import WheelBuilder

    source = workdir / "src"
    for name in ("pyproject.toml", "README.md"):
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / name, source / name)
    shutil.copytree(REPO / "webhook", source / "webhook", ignore=shutil.ignore_patterns("__pycache__", "_data"))
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    for directory in pyproject["tool"]["hatch"]["build"]["targets"]["wheel"]["force-include"]:
        if (REPO / directory).is_dir():
            shutil.copytree(REPO / directory, source / directory)
        else:
            (source / directory).mkdir(parents=True)
    (wheel,) = WheelBuilder(str(source)).build(directory=str(workdir / "dist"), versions=["standard"])
    return Path(wheel)
