"""Shared test helpers: where the upstream CRDs and validator live when ../shared is present."""

import os
import pathlib

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
SHARED_DIR = pathlib.Path(os.environ.get("KFSTACK_SHARED_DIR", REPO_ROOT.parent / "shared"))
