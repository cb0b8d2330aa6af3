"""A distribution's metadata as pip leaves it in a venv (``<name>-<version>.dist-info``), for
tests of what kfstack finds in installed packages: ``importlib.metadata`` reads exactly this."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path


def install_metadata(
    site: Path, package: str, entry_points: Mapping[str, Mapping[str, str]], version: str = "1.0"
) -> None:
    """Writes ``package``'s metadata into ``site`` (a folder on ``sys.path``) declaring
    ``entry_points``: group -> entry point name -> ``module:attribute``."""
    info = site / f"{package.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package}\nVersion: {version}\n")
    sections = [
        f"[{group}]\n" + "".join(f"{name} = {value}\n" for name, value in points.items())
        for group, points in entry_points.items()
    ]
    (info / "entry_points.txt").write_text("\n".join(sections))
