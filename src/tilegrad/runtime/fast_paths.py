"""A dynamic module with fast paths: modules specialised to values of its dimensions that a user named.

One library serves every value of a dynamic dimension within its bounds, its schedules chosen for a
representative value (DESIGN.md, decision 8). A server that mostly sees a few shapes (a length of 128 and one of
512, say) can have those compiled as fixed shapes too: `tilegrad.compile(..., dynamic={"seq": (1, 512)},
specialize={"seq": [128, 512]})`. A call reads the dimensions' values from its inputs' shapes, as the dynamic
module does, and runs the specialised module where their values are one of those named, the dynamic one
otherwise. Every module is compiled up front: no call compiles.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from .dims import bind
from .module import Module, bind_arguments


class FastPathModule:
    """`dynamic` (a Module with dynamic dimensions) and `paths`: {values of the specialised dimensions, in the
    order of `keys` (their keys in the module's `spec.dims`): the Module compiled for them}."""

    def __init__(self, dynamic: Module, keys: tuple[str, ...], paths: Mapping[tuple[int, ...], Module]):
        self.dynamic = dynamic
        self.keys = keys
        self.paths = dict(paths)

    @property
    def input_names(self) -> list[str]:
        return self.dynamic.input_names

    @property
    def output_names(self) -> list[str]:
        return self.dynamic.output_names

    def module_for(self, *args, **kwargs) -> Module:
        """The module a call with these inputs runs; a dimension outside its bounds is the dynamic module's
        KernelCallError."""
        given = bind_arguments(self.input_names, args, kwargs)
        specs = self.dynamic.spec.inputs
        values = bind(self.dynamic.spec.dims, specs, [np.shape(given[s.name]) for s in specs])
        return self.paths.get(tuple(values[k] for k in self.keys), self.dynamic)

    def __call__(self, *args, **kwargs):
        return self.module_for(*args, **kwargs)(*args, **kwargs)

    def profile(self, *args, repeats: int = 20, warmup: int = 2, peaks=None, **kwargs):
        """The profile (`Module.profile`) of the module these inputs run."""
        return self.module_for(*args, **kwargs).profile(*args, repeats=repeats, warmup=warmup, peaks=peaks,
                                                        **kwargs)
