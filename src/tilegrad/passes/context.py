"""What a graph pass reads and writes while it runs.

Its own module, below both the passes and the driver (pipeline.py), so a pass imports it without importing the
pipeline that lists the pass.
"""

from __future__ import annotations

import dataclasses

from ..target import Target, host


@dataclasses.dataclass
class PassContext:
    """What a pass may read (the options) and write (its notes for --explain, and decisions by pass name that
    later stages read: the conv_algorithm pass's per-node choices, which the tuner varies)."""

    opt_level: int = 2
    target: Target = dataclasses.field(default_factory=host)
    options: dict = dataclasses.field(default_factory=dict)
    notes: list[str] = dataclasses.field(default_factory=list)
    decisions: dict = dataclasses.field(default_factory=dict)

    def note(self, message: str) -> None:
        self.notes.append(message)
