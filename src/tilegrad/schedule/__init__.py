"""Schedules as traces of primitives over a loop state."""

from .primitives import PRIMITIVES as PRIMITIVES
from .schedule import Schedule as Schedule, apply_trace as apply_trace
from .state import LoopState as LoopState
from .trace import Step as Step, Trace as Trace
