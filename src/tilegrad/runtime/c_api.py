"""Where the C API's header is: `include_dir()/tilegrad.h`, what a C or C++ program includes to load a saved
module and run it without Python (examples/c_api/run_model.c)."""

from __future__ import annotations

from pathlib import Path


def include_dir() -> Path:
    """The directory to pass to the C compiler with -I."""
    return Path(__file__).resolve().parents[1] / "include"
