"""How this installation of autogk is called, so that a printed hint works as printed."""
from __future__ import annotations

import shutil
import sys
from pathlib import Path


def command_name() -> str:
    """How to call autogk so that a printed hint works as printed: `autogk` when PATH finds this very
    installation, else the full path of its script (setup.sh's .venv is not on PATH until activated)."""
    here = Path(sys.executable).parent / "autogk"
    found = shutil.which("autogk")
    if not here.exists() or (found and Path(found).resolve() == here.resolve()):
        return "autogk"
    return str(here)  # absolute: the hints are followed after `cd` into the project
