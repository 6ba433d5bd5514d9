"""Compiling with tuning records: each kernel takes the best valid schedule recorded for its workload on this
machine; a kernel never tuned (or whose record no longer replays) keeps the default rules. The convolutions'
algorithms are chosen from the same records before (algorithms.py)."""

from __future__ import annotations

import warnings
from pathlib import Path

from .. import metrics
from ..errors import TilegradError
from ..ir.graph import Node
from ..schedule.schedule import apply_trace
from ..schedule.trace import Trace
from ..te.tensor import Tensor
from .records import Database, RecordsFromAnotherMachine
from .task import workload_key


class BestRecords:
    """A schedule chooser for `executor.compile_graph` (or `cuda_executor.compile_graph`) over a records database:
    the records of this machine, or of the target `fingerprint` names (`records.target_fingerprint`). Where the
    database holds none of this machine's but some of another of its class (same ISA and compiler flags), those
    are used, with a `RecordsFromAnotherMachine` warning."""

    def __init__(self, path: str | Path, *, fingerprint: str | None = None):
        if not Path(path).is_file():
            raise TilegradError(f"no tuning records database at {path}")
        self.db = Database(path, fingerprint=fingerprint)
        kin = self.db.kin()
        if kin is not None:
            warnings.warn(RecordsFromAnotherMachine(
                f"{path} holds no records of this machine ({self.db.fingerprint}); using those of {kin}, which has "
                "the same instruction set and compiler flags. `tilegrad tune` here resumes from them and fits "
                "this machine"), stacklevel=3)
            self.db.fingerprint = kin
        self.applied = 0

    def latency(self, task_key: str) -> float | None:
        """The best recorded latency of a workload on this machine, or None."""
        record = self.db.best(task_key)
        return None if record is None else record.latency

    def __call__(self, node: Node, outputs: list[Tensor]) -> Trace | None:
        record = self.db.best(workload_key(outputs))
        if record is None:
            return None
        try:
            apply_trace(outputs, record.trace)
        except TilegradError as e:
            warnings.warn(f"the tuned schedule of {node.name!r} does not replay ({e}); using the default",
                          stacklevel=2)
            return None
        self.applied += 1
        metrics.bump("tune.records_applied")
        return record.trace

    def __enter__(self) -> BestRecords:
        return self

    def __exit__(self, *exc) -> None:
        self.db.close()
