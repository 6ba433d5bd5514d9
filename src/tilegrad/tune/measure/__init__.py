"""Measuring candidates: what goes in and comes out (`result.py`), the builder (`builder.py`, over the build
worker `_builder.py`), the `Runner` protocol with the local runner (`runner.py`), and the measurer that runs a
batch through both (`measurer.py`). On a Ray cluster (the `ray` extra, so imported by name, not here):
`ray_cluster.py` (devices under keys, `ray_measurer`), `ray_builder.py`, `ray_runner.py`, over `ray_actors.py`
and `ray_pool.py`."""

from .measurer import Measurer as Measurer
from .result import ERROR_KINDS as ERROR_KINDS
from .result import MeasureInput as MeasureInput
from .result import MeasureResult as MeasureResult
from .runner import LocalRunner as LocalRunner
from .runner import Runner as Runner
