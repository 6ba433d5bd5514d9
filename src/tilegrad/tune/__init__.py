"""Schedule tuning: tasks from a compiled graph, sketches and their parameters, program features, cost models,
search policies, the measurer and the records database.

The package itself is callable, so that the public entry point reads `tilegrad.tune(model, db=..., trials=N)`
(see `tuner.tune`) while its parts stay importable as `tilegrad.tune.<module>`.
"""

import sys
import types


class _Tune(types.ModuleType):
    def __call__(self, model, **options):
        from .tuner import tune

        return tune(model, **options)


sys.modules[__name__].__class__ = _Tune
