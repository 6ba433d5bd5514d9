"""Schedule tuning: tasks from a compiled graph, their search spaces and policies (`search/`), program features
(`features/`), Felix's smooth objective (`felix/`), cost models (`cost_model/`), building and timing candidates
(`measure/`), the records database, the task scheduler and the tuning loop (`tuner.py`) with its callbacks.

The package itself is callable, so that the public entry point reads `tilegrad.tune(model, db=..., trials=N)`
(see `model.tune`) while its parts stay importable as `tilegrad.tune.<module>`. Only a module's class can make it
callable, and importing any `tilegrad.tune.<module>` binds the name `tilegrad.tune` to this package (replacing a
function of that name, or a module `__getattr__`'s answer), so the class is set below: Python's documented way to
customise a module object (language reference, "Customizing module attribute access").
"""

import sys
import types


class _CallablePackage(types.ModuleType):
    def __call__(self, model, **options):
        from .model import tune

        return tune(model, **options)


sys.modules[__name__].__class__ = _CallablePackage
