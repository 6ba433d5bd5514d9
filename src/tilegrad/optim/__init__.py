"""Training-side optimizers: THOR, the trace-based second-order optimizer of MindSpore, for PyTorch models."""

from .block_size import BlockSizeChoice as BlockSizeChoice
from .block_size import choose_thor_block_size as choose_thor_block_size
from .blocks import information_loss as information_loss
from .blocks import split_blocks as split_blocks
from .schedules import get_thor_damping as get_thor_damping
from .schedules import get_thor_lr as get_thor_lr
from .thor import THOR as THOR
from .trace_rule import PRESETS as PRESETS
