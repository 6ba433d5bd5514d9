"""The one error hierarchy: every failure a user can cause says what, where and what to do."""


class TilegradError(Exception):
    """Base of all errors tilegrad raises on purpose."""


class ExprError(TilegradError):
    """An ill-formed expression (mismatched dtypes, an unknown variable, a bad operator)."""


class ShapeError(TilegradError):
    """Tensors whose shapes or dtypes do not fit the operation."""


class UnsupportedOpError(TilegradError):
    """An op the registry or a frontend does not know; the message names every such op and node."""


class UnsupportedOpsError(UnsupportedOpError):
    """Nodes of a captured torch program that tilegrad does not lower (`nodes`, FX node names; `ops`, the ops
    and why): the rest of the program can still be compiled around them (`torch_partition.py`)."""

    def __init__(self, summary: str, program, nodes: frozenset[str], ops: list[str]):
        super().__init__(f"{len(ops)} op(s) not supported: {summary}")
        self.summary, self.program, self.nodes, self.ops = summary, program, nodes, ops


class UnsupportedFeatureError(UnsupportedOpError, ShapeError):
    """A known op used in a way tilegrad does not compile: a shape-like input computed at run time (tilegrad
    compiles static shapes), an empty tensor, or an attribute value with no implementation."""


class TrainingModeError(UnsupportedFeatureError):
    """A training-time op (dropout that drops) in a model compiled for inference: the model is in the wrong mode,
    so it is refused rather than run around (the message says to call module.eval())."""


class UnknownAttributeError(TilegradError):
    """An attribute an op does not declare."""


class ScheduleError(TilegradError):
    """An illegal schedule step; the message names the step index, primitive and loops."""


class LoweringError(TilegradError):
    """A schedule that cannot be lowered to loop IR."""


class BuildError(TilegradError):
    """The C compiler is missing or rejected the generated source."""


class KernelCallError(TilegradError):
    """Arrays passed to a kernel or a module that do not match its parameters (count, name, dtype, shape)."""


class ModuleFormatError(TilegradError):
    """A module directory that cannot be loaded or saved into: incomplete, edited or truncated, from an
    incompatible version, or (for saving) holding files that are not a module's."""


class MeasureError(TilegradError):
    """A timing that could not be taken (crash, timeout, bad result)."""


class RecordsError(TilegradError):
    """A tuning records database that cannot be used: not a records file, another schema, corrupt; the message
    names the path."""


class ResourceLimitError(UnsupportedFeatureError):
    """A model larger than tilegrad compiles: a tensor of too many elements, or a constant too large to compute
    while compiling; the message names the node or input and the limit."""


class MemoryLimitError(ResourceLimitError):
    """A model whose tensors cannot exist on this machine: more bytes than its memory, or sizes that overflow
    64-bit indices; the message names the largest tensor or the total."""


class OptimizerError(TilegradError):
    """A training step that cannot be taken as asked (a damped curvature factor that is not positive definite, a
    bad hyperparameter); the message names the layer or parameter and the reason."""


class MissingDependencyError(TilegradError, ImportError):
    """An optional dependency a feature needs is not installed (pyproject's extras; `extras.require`)."""
