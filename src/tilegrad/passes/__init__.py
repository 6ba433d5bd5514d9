"""Graph passes: each module holds one rewrite; pipeline.py lists them in order and runs them."""

from .context import PassContext as PassContext
from .pipeline import PIPELINE as PIPELINE, optimize as optimize, pass_names as pass_names
