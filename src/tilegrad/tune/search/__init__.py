"""Search policies: the protocol and registry (`policy.py`), a task's space of candidates (`space.py`), Felix's
gradient search (`gradient.py`) and Ansor's evolutionary search (`evolutionary.py`), both registered by name."""

from . import evolutionary as _evolutionary  # noqa: F401  (registers "evolutionary")
from . import gradient as _gradient  # noqa: F401  (registers "gradient")
from .policy import POLICIES as POLICIES
from .policy import SearchPolicy as SearchPolicy
from .policy import TaskSearch as TaskSearch
from .policy import make_policy as make_policy
from .policy import register_policy as register_policy
