"""AutoTVM: schedule templates with knobs (`space.py`, `template.py`, one module per op family), the task's
configs as candidates (`task_space.py`), parallel simulated annealing (`annealing.py`) and the search policy
registered as "autotvm" (`policy.py`), which ranks configs with the XGBoost model of `cost_model/xgb.py`."""

from . import policy as _policy  # noqa: F401  (registers "autotvm")
from . import templates_conv as _templates_conv  # noqa: F401  (registers the convolution templates)
from . import templates_matmul as _templates_matmul  # noqa: F401  (registers the matmul template)
from . import templates_packed as _templates_packed  # noqa: F401  (registers the packed GEMM and convolution)
from .annealing import AnnealingOptions as AnnealingOptions
from .annealing import anneal as anneal
from .policy import AutoTVMPolicy as AutoTVMPolicy
from .space import ConfigEntity as ConfigEntity
from .space import ConfigSpace as ConfigSpace
from .template import TEMPLATES as TEMPLATES
from .template import Template as Template
from .template import find_template as find_template
from .template import register_template as register_template
