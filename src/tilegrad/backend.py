"""The backend registry: what differs between kinds of target (a CPU, a CUDA GPU), found by the target's kind.

A layer that needs a kind-specific piece asks `backend_for(target)` for it rather than comparing the kind: the
schedule layer for the default rules and the sketch rules, the kernel path for a renderer, the tuner for the
feature set, the records' fingerprint and the measurer, the API for the executor. The rows are written once, in
`backends.py` at the top of the package, which may import every layer and is imported with the package; this
leaf holds only the protocol and the table, so that every layer can read it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from .errors import TilegradError

if TYPE_CHECKING:
    from .config import Config
    from .target import Target


class Backend(Protocol):
    """One kind of target: its facts, and the pieces each layer takes from it."""

    kind: str  # the `Target.kind` it serves
    gpu_features: bool  # the tuner's feature vectors carry the GPU features (threads, shared memory, coalescing)
    chooses_graph: bool  # tuning records choose convolution algorithms, attention forms and fusion plans
    fuses_attention: bool  # "auto" makes each attention one kernel (else its products and softmax stay apart)
    remote_measurers: bool  # candidates may be built and timed on a Ray cluster
    saves_module: bool  # its compiled module is saved whole (else `tilegrad compile` writes its source)
    symbolic_dims: bool  # dynamic dimensions stay symbolic in its code (`compile(dynamic=)`)

    def renderer(self, target: Target) -> Any:
        """The loop-IR printer of its kernels."""

    def build(self, sources: list[str], target: Target, cfg: Config | None) -> Any:
        """Rendered translation units built (or found in the cache) into what its runtime loads."""

    def default_schedule(self, outputs: list, target: Target, knobs: Any, rules: dict | None) -> Any:
        """The hand-written schedule of a kernel (`schedule.defaults.default_schedule`)."""

    def sketches(self, outputs: Any, target: Target, limit: int) -> list:
        """The sketches the derivation rules give, after the default one (`schedule.sketch.generate_sketches`)."""

    def fingerprint(self, target: Target, cfg: Config | None) -> str:
        """What names the machine that timed a record (`tune.records.target_fingerprint`)."""

    def require_device(self) -> None:
        """Raise, saying why, when there is nothing to run this kind's code on here."""

    def measurer(self, target: Target) -> Any:
        """A fresh measurer that builds and times candidates on this machine."""

    def compile_graph(self, graph: Any, cfg: Config | None, choose: Any, target: Target) -> Any:
        """The whole optimised graph as a loaded, callable module."""


BACKENDS: dict[str, Backend] = {}


def register_backend(backend: Backend) -> Backend:
    """Add a row to the table (done once per kind, by `backends.py`)."""
    BACKENDS[backend.kind] = backend
    return backend


def backend_for(target: Target) -> Backend:
    """The row of `target`'s kind."""
    try:
        return BACKENDS[target.kind]
    except KeyError:
        raise TilegradError(f"no backend for targets of kind {target.kind!r}; the backends are "
                            f"{', '.join(BACKENDS)}") from None
