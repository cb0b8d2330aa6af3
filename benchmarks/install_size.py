"""What a team installs for its first hour: packages and megabytes of each embedded-platform
extra (``local``: both frameworks; ``local-torch``, ``local-tf``: one), against ``local`` as the
baseline, measured in the same run.

Each extra's requirements are read from ``pyproject.toml`` (an extra naming ``kfstack[...]`` is
expanded) and followed through the installed packages' own requirements; the size is that of
every file the installed distributions list, as this environment holds them (CPU builds). It
needs an environment with ``local`` installed (``make setup``) and downloads nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import os
import pathlib
import re
import tomllib

from packaging.requirements import Requirement

from benchmarks.common import machine_facts, write_result

PYPROJECT = pathlib.Path(__file__).resolve().parents[1] / "pyproject.toml"
EXTRAS = ("local", "local-torch", "local-tf")


def _key(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirements(extra: str, declared: dict[str, list[str]]) -> set[Requirement]:
    """The third-party requirements of kfstack's ``extra``, its own extras expanded."""
    found: set[Requirement] = set()
    for line in declared[extra]:
        requirement = Requirement(line)
        if _key(requirement.name) == "kfstack":
            for inner in requirement.extras:
                found |= requirements(inner, declared)
        else:
            found.add(requirement)
    return found


def installed_closure(roots: set[Requirement]) -> dict[str, importlib.metadata.Distribution]:
    """Every installed distribution ``roots`` need, their extras' requirements included."""
    seen: dict[str, importlib.metadata.Distribution] = {}
    todo = list(roots)
    while todo:
        requirement = todo.pop()
        key = _key(requirement.name)
        try:
            distribution = importlib.metadata.distribution(requirement.name)
        except importlib.metadata.PackageNotFoundError:
            continue  # a platform's requirement (marker) this environment did not need
        new = key not in seen
        seen[key] = distribution
        for line in distribution.requires or []:
            inner = Requirement(line)
            environments = [{"extra": e} for e in requirement.extras] or [{"extra": ""}]
            if inner.marker and not any(inner.marker.evaluate(env) for env in environments):
                continue
            if new or inner.extras:
                todo.append(inner)
    return seen


def megabytes(distribution: importlib.metadata.Distribution) -> float:
    total = 0
    for name in distribution.files or []:
        with contextlib.suppress(OSError):  # a file the record lists and the install lacks
            total += os.path.getsize(str(distribution.locate_file(name)))
    return total / 2**20


def main(argv: list[str] | None = None) -> dict:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args(argv)
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    base = {Requirement(line) for line in project["dependencies"]}
    figures: dict[str, dict[str, float]] = {}
    for extra in EXTRAS:
        closure = installed_closure(base | requirements(extra, project["optional-dependencies"]))
        figures[extra] = {
            "packages": len(closure),
            "megabytes": round(sum(megabytes(d) for d in closure.values())),
        }
    baseline = figures["local"]
    for extra in EXTRAS:
        figures[extra]["of_local"] = round(figures[extra]["megabytes"] / baseline["megabytes"], 2)
    result = {"benchmark": "install_size", "machine": machine_facts(), "figures": figures}
    print(write_result(result))
    for extra, values in figures.items():
        share = f"{values['of_local']} of local"
        print(f"kfstack[{extra}]: {values['packages']} packages, {values['megabytes']} MiB ({share})")
    return result


if __name__ == "__main__":
    main()
