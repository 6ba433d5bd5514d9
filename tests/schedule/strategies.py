"""Hypothesis strategies: random *valid* schedules, drawn step by step against a live Schedule, and random points
of a sketch."""

from __future__ import annotations

from hypothesis import strategies as st

from tilegrad.schedule import Schedule
from tilegrad.schedule.space import Sketch


def _consumer_of(sch: Schedule, name: str):
    """The only stage that reads `name`, or None (compute_at needs every reader inside the attach loop)."""
    readers = [s for s in sch.state.stages if any(inp.name == name for inp in s.op.inputs)]
    if len(readers) == 1 and readers[0].attach != "inline":
        return readers[0]
    return None


@st.composite
def valid_schedules(draw, make_outputs, *, max_loop_steps: int = 6) -> Schedule:
    """A schedule of the computation built by `make_outputs()`: optional cache_write or rfactor (of either part of
    a split) of the output and cache_read of an input, random placement of every producer stage (root, inline,
    or at a random loop of its consumer), random non-divisible splits, fuses, reorders, and
    parallel/vectorize/unroll/auto_unroll."""
    outputs = make_outputs()
    sch = Schedule(outputs)
    out = sch.state.outputs[0]
    out_stage = sch.state.stage(out.name)
    if out_stage.op.reduce_axes:
        choice = draw(st.sampled_from(["none", "cache_write", "rfactor"]))
        if choice == "cache_write":
            sch.cache_write(out.name)
        elif choice == "rfactor":
            axis = draw(st.sampled_from(out_stage.op.reduce_axes))
            parts = sch.split(out.name, axis.name, draw(st.integers(1, axis.upper.value + 1)))
            sch.rfactor(out.name, draw(st.sampled_from(parts)))  # partition c % f (inner) or c // f (outer)
    if draw(st.booleans()):
        reader = sch.state.stages[-2] if len(sch.state.stages) > 1 else sch.state.stages[-1]
        inputs = [t for t in reader.op.inputs if t in sch.state.placeholders]
        if inputs:
            sch.cache_read(draw(st.sampled_from(inputs)).name, "local", [reader.name])
    stage_names = [s.name for s in sch.state.stages]
    for name in stage_names:
        _shuffle_loops(draw, sch, name, max_loop_steps)
    for name in reversed(stage_names[:-1]):
        s = sch.state.stage(name)
        consumer = _consumer_of(sch, name)
        choice = draw(st.sampled_from(["root", "inline", "at"]))
        if choice == "root":
            sch.compute_root(name)
        elif choice == "inline" and not s.op.reduce_axes and not s.relations and \
                all(lp.kind == "serial" for lp in s.loops.values()):
            sch.compute_inline(name)
        elif consumer is not None and (choice == "at" or name.endswith("_local")):
            loop = draw(st.sampled_from(sch.state.stage(consumer.name).leaves))
            sch.compute_at(name, consumer.name, loop)
    for name in stage_names:
        if sch.state.stage(name).attach != "inline":
            _annotate(draw, sch, name)
    return sch


def _shuffle_loops(draw, sch: Schedule, name: str, max_steps: int) -> None:
    for _ in range(draw(st.integers(0, max_steps))):
        s = sch.state.stage(name)
        kind = draw(st.sampled_from(["split", "split", "split_nparts", "fuse", "reorder"]))
        if kind.startswith("split"):
            loop = draw(st.sampled_from(s.leaves))
            extent = s.loops[loop].extent.value
            n = draw(st.integers(1, extent + 2))
            if kind == "split":
                sch.split(name, loop, n)
            else:
                sch.split(name, loop, nparts=n)
        elif kind == "fuse" and len(s.leaves) >= 2:
            i = draw(st.integers(0, len(s.leaves) - 2))
            a, b = s.leaves[i], s.leaves[i + 1]
            if s.loops[a].is_reduce == s.loops[b].is_reduce:
                sch.fuse(name, a, b)
        elif kind == "reorder" and len(s.leaves) >= 2:
            sch.reorder(name, *draw(st.permutations(s.leaves)))


def _annotate(draw, sch: Schedule, name: str) -> None:
    s = sch.state.stage(name)
    spatial = [leaf for leaf in s.leaves if not s.loops[leaf].is_reduce]
    if spatial and draw(st.booleans()):
        sch.parallel(name, draw(st.sampled_from(spatial)))
    if spatial and draw(st.booleans()):
        leaf = spatial[-1]
        if s.loops[leaf].kind == "serial":
            sch.vectorize(name, leaf)
    if draw(st.booleans()):
        leaf = draw(st.sampled_from(s.leaves))
        if s.loops[leaf].kind == "serial":
            sch.unroll(name, leaf)
    if draw(st.booleans()):
        sch.auto_unroll(name, draw(st.sampled_from([0, 16, 64, 512])))


class DrawnKnobs:
    """Knobs (schedule/knobs.py's interface) that draw every parameter of a rule from the values it offers, with
    hypothesis's `data()`; `drawn` records them for the failure message."""

    def __init__(self, data):
        self.data, self.drawn = data, {}

    def choice(self, name, values, default):
        self.drawn[name] = self.data.draw(st.sampled_from(sorted(values)), label=name)
        return self.drawn[name]

    pick = choice


@st.composite
def sketch_points(draw, sketch: Sketch) -> dict:
    """A point of `sketch`: structural choices in the order the trace makes them, then the numeric ones."""
    params: dict = {}
    while True:
        _, space = sketch.space(params)
        pending = [c for c in space.structural if c.var not in params]
        if not pending:
            break
        params[pending[0].var] = draw(st.sampled_from(pending[0].values))
    for c in space.choices:
        params[c.var] = draw(st.sampled_from(c.values))
    return params
