"""A compile's progress on a terminal: the graph passes, the kernels lowered and rendered of their total, and the
build, with whether the library came from the build cache.

`tilegrad.compile` opens a reporter for its own work (`reporting`); the passes and the executor report to the one
open, if any (`stage`, `advance`, `note`), so that a compile inside the tuner or a test, which opens none, prints
nothing. The bar is tqdm's, drawn only where stderr is a terminal and erased when the compile ends.
"""

from __future__ import annotations

import contextlib
import contextvars
import sys

_bar: contextvars.ContextVar = contextvars.ContextVar("tilegrad_progress", default=None)


@contextlib.contextmanager
def reporting():
    """Report the progress of the work inside, on stderr if it is a terminal."""
    if _bar.get() is not None or not sys.stderr.isatty():
        yield
        return
    from tqdm import tqdm

    bar = tqdm(total=0, desc="compiling", leave=False, dynamic_ncols=True, file=sys.stderr, disable=False)
    token = _bar.set(bar)
    try:
        yield
    finally:
        _bar.reset(token)
        bar.close()


def stage(name: str, total: int) -> None:
    """A stage of `total` steps begins."""
    bar = _bar.get()
    if bar is not None:
        bar.reset(total=total)
        bar.set_description(name)


def advance(note: str = "") -> None:
    """One step of the stage is done (`note`: what it was)."""
    bar = _bar.get()
    if bar is not None:
        bar.update()
        if note:
            bar.set_postfix_str(note)


def note(text: str) -> None:
    """Say `text` beside the bar."""
    bar = _bar.get()
    if bar is not None:
        bar.set_postfix_str(text)
