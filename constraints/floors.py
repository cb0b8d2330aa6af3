"""Prints a pip constraints file holding each of kfstack's requirements at its floor.

    python constraints/floors.py EXTRA[,EXTRA...] > floors.txt
    pip install -c floors.txt -e ".[EXTRA,...]"

Every requirement of the core and of the named extras (followed through extras that name other
extras of kfstack) with a lower bound (``>=X``) becomes ``name==X``: the oldest combination the
ranges in pyproject.toml admit, which `make test-floors` installs and tests. A requirement with
no lower bound is left to the resolver. Standard library only: it runs before any venv exists.
"""

from __future__ import annotations

import pathlib
import re
import sys
import tomllib

PYPROJECT = pathlib.Path(__file__).resolve().parents[1] / "pyproject.toml"
_REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?\s*([^;]*)")


def _requirements(project: dict, extras: list[str]) -> list[str]:
    name = project["name"]
    optional = project.get("optional-dependencies", {})
    pending, seen, found = list(extras), set(), list(project.get("dependencies", []))
    while pending:
        extra = pending.pop()
        if extra in seen:
            continue
        if extra not in optional:
            raise SystemExit(f"floors.py: {name} has no extra {extra!r}")
        seen.add(extra)
        for requirement in optional[extra]:
            match = _REQUIREMENT.match(requirement)
            if match and match.group(1) == name:
                pending.extend(part.strip() for part in (match.group(2) or "").split(","))
            else:
                found.append(requirement)
    return found


def floors(extras: list[str]) -> list[str]:
    """``name==floor`` for every requirement of the core and ``extras`` that has a floor."""
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    pinned: dict[str, str] = {}
    for requirement in _requirements(project, extras):
        match = _REQUIREMENT.match(requirement)
        if not match:
            raise SystemExit(f"floors.py: cannot read the requirement {requirement!r}")
        name, specifiers = match.group(1).lower().replace("_", "-"), match.group(3)
        for specifier in specifiers.split(","):
            specifier = specifier.strip()
            if specifier.startswith(">="):
                pinned[name] = specifier[2:].strip()
    return [f"{name}=={version}" for name, version in sorted(pinned.items())]


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    print(f"# The floors of kfstack[{sys.argv[1]}] (constraints/floors.py); not a lock.")
    print("\n".join(floors([extra for extra in sys.argv[1].split(",") if extra])))
