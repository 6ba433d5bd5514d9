"""Schedule tuning: tasks from a compiled graph, their search spaces and policies (`search/`), program features
(`features/`), Felix's smooth objective (`felix/`), cost models (`cost_model/`), building and timing candidates
(`measure/`), the records database, the task scheduler and the tuning loop (`tuner.py`) with its callbacks.

The package itself is callable, so that the public entry point reads `tilegrad.tune(model, db=..., trials=N)`
(see `model.tune`) while its parts stay importable as `tilegrad.tune.<module>`.
"""

import sys
import types


class _Tune(types.ModuleType):
    def __call__(self, model, **options):
        from .model import tune

        return tune(model, **options)


sys.modules[__name__].__class__ = _Tune
