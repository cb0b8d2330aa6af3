"""A PyTorch team's first hour, from nothing to a green first run: the commands it types, what
they install and how long each takes.

As the team guide has it, in a fresh folder:

1. ``python3.11 -m venv .venv``
2. ``.venv/bin/pip install "kfstack[local-torch] @ <kfstack's wheel>"``
3. ``.venv/bin/kfstack init churn``
4. ``cd churn && make run`` (installs the project into the same environment, runs its pipeline
   embedded: Spark, 4 tuning trials, 2 training ranks, evaluation, deployment)

kfstack's wheel is built from this checkout first (not timed: a team gets it built). Downloads
are excluded as the measure asks: pip installs from its cache, which holds every package once an
environment of this machine installed it (``make setup``); a cold cache adds the registry's
download time on top. Packages are counted and sized in the new environment's site-packages.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any

from benchmarks.common import machine_facts, write_result

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]


def _timed(argv: list[str], cwd: pathlib.Path, env: dict[str, str]) -> float:
    start = time.monotonic()
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    seconds = time.monotonic() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return round(seconds, 1)


def _site_packages(venv: pathlib.Path) -> pathlib.Path:
    return venv / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"


def _size_mib(folder: pathlib.Path) -> int:
    total = 0
    for base, _, names in os.walk(folder):
        for name in names:
            path = os.path.join(base, name)
            if not os.path.islink(path):
                total += os.path.getsize(path)
    return round(total / 2**20)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true", help="keep the work folder (printed)")
    args = parser.parse_args(argv)
    work = pathlib.Path(tempfile.mkdtemp(prefix="kfstack-first-hour-"))
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    wheels = work / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(REPO_ROOT)],
        check=True,
        env=env,
    )
    (wheel,) = wheels.glob("kfstack-*.whl")
    team = work / "team"
    team.mkdir()
    venv = team / ".venv"
    steps = {
        "venv": _timed([sys.executable, "-m", "venv", str(venv)], team, env),
        "install": _timed(
            [str(venv / "bin" / "pip"), "install", "-q", f"kfstack[local-torch] @ {wheel.as_uri()}"],
            team,
            env,
        ),
    }
    packages = subprocess.run(
        [str(venv / "bin" / "pip"), "list", "--format=freeze"], capture_output=True, text=True, check=True
    ).stdout.split()
    installed = {"packages": len(packages), "megabytes": _size_mib(_site_packages(venv))}
    steps["init"] = _timed([str(venv / "bin" / "kfstack"), "init", "churn"], team, env)
    steps["make_run"] = _timed(["make", "run"], team / "churn", env)
    result: dict[str, Any] = {
        "benchmark": "first_hour",
        "machine": machine_facts(),
        "commands_typed": 4,
        "installed": installed,
        "seconds": {**steps, "total": round(sum(steps.values()), 1)},
    }
    print(write_result(result))
    print(
        f"{installed['packages']} packages, {installed['megabytes']} MiB; "
        + ", ".join(f"{name} {value} s" for name, value in result["seconds"].items())
    )
    if args.keep:
        print(work)
    else:
        shutil.rmtree(work, ignore_errors=True)
    return result


if __name__ == "__main__":
    main()
