"""How to compile a model, as one value: what `tilegrad.compile`, the command line and a saved specialising
module pass whole to the compile driver, instead of a dozen keywords read back with defaults at each step."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path

from .errors import TilegradError
from .target import TARGETS


@dataclasses.dataclass(frozen=True)
class CompileOptions:
    """`target`: "cpu" or "cuda". `opt_level`: the graph passes (0: none, one kernel per op; 2: all; 3: the
    opt-in ones too); `disable_passes` / `enable_passes` switch single passes off or on
    (`tilegrad.passes.pass_names()` lists them). `db`: a tuning records database (`tilegrad.tune`): each
    convolution gets the algorithm whose tuned kernels make the graph fastest, each kernel the best valid schedule
    recorded for its workload on this machine, and the default rules where none was tuned. `fusion`: "rules"
    (the rule-based pass) or "stitch" (FusionStitching's search over plans, scored with this machine's measured
    costs; with `db`, the records choose between the two plans). `attention_form`: the softmax form of the
    attention kernels, "auto" (by shape on a CPU: blockwise for long key sequences; with `db`, the form whose
    tuned kernels are faster), "two_pass" or "blockwise"; `attention_key_block`: keys per block of the blockwise
    form (None: the block that pads the keys least). `threads`: how many threads the module's kernels run on (None:
    the configured count, by default the CPUs this process may use, `config.usable_cpus`)."""

    target: str = "cpu"
    opt_level: int = 2
    disable_passes: tuple[str, ...] = ()
    enable_passes: tuple[str, ...] = ()
    db: str | None = None
    fusion: str = "rules"
    attention_form: str = "auto"
    attention_key_block: int | None = None
    threads: int | None = None

    def __post_init__(self):
        object.__setattr__(self, "disable_passes", tuple(self.disable_passes))
        object.__setattr__(self, "enable_passes", tuple(self.enable_passes))
        if isinstance(self.db, Path):
            object.__setattr__(self, "db", str(self.db))
        if self.target not in TARGETS:
            raise TilegradError(f"target {self.target!r} is not supported; available: {', '.join(TARGETS)}")
        if self.opt_level not in (0, 1, 2, 3):
            raise TilegradError(f"opt_level must be 0, 1, 2 or 3, got {self.opt_level!r}")
        if self.threads is not None and (type(self.threads) is not int or self.threads < 1):
            raise TilegradError(f"threads must be a positive integer or None, got {self.threads!r}")

    @classmethod
    def of(cls, options: CompileOptions | None = None, **changes) -> CompileOptions:
        """`options` (default: the defaults) with `changes`, each a field; an unknown keyword names the fields."""
        unknown = sorted(set(changes) - {f.name for f in dataclasses.fields(cls)})
        if unknown:
            raise TypeError(f"unknown compile option(s) {', '.join(unknown)}; the options are "
                            + ", ".join(f.name for f in dataclasses.fields(cls)))
        return dataclasses.replace(options or cls(), **changes)

    def to_json(self) -> dict:
        return {**dataclasses.asdict(self), "disable_passes": list(self.disable_passes),
                "enable_passes": list(self.enable_passes)}

    @classmethod
    def from_json(cls, data: Mapping) -> CompileOptions:
        """The options a saved module recorded; keys it does not know (older or newer fields) are refused."""
        return cls.of(**dict(data))
