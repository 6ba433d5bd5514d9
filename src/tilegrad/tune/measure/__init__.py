"""Measuring candidates: what goes in and comes out (`result.py`), the builder (`builder.py`, over the build
worker `_builder.py`), the `Runner` protocol with the local runner (`runner.py`), and the measurer that runs a
batch through both (`measurer.py`)."""

from .measurer import Measurer as Measurer
from .result import ERROR_KINDS as ERROR_KINDS
from .result import MeasureInput as MeasureInput
from .result import MeasureResult as MeasureResult
from .runner import LocalRunner as LocalRunner
from .runner import Runner as Runner
