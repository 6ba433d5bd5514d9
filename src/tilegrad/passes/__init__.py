"""Graph passes. Importing the modules below registers their passes; each names its place in the pipeline:

    5 fold_qdq          10 fold_constants   20 simplify       30 cse           40 bn_fold          50 fold_bias
    60 hoist_slice      65 attention      70 expand         80 conv_algorithm 85 sink_reshape    90 layout
    100 fuse
"""

from .pipeline import optimize, pass_names  # noqa: F401
from . import quantize  # noqa: F401
from . import fold  # noqa: F401
from . import simplify  # noqa: F401
from . import cse  # noqa: F401
from . import bn_fold  # noqa: F401
from . import bias  # noqa: F401
from . import hoist_slice  # noqa: F401
from . import attention  # noqa: F401
from . import conv_algorithm  # noqa: F401
from . import expand  # noqa: F401
from . import layout  # noqa: F401
from . import sink_reshape  # noqa: F401
from . import fuse  # noqa: F401
from . import stitch  # noqa: F401  (the fuse pass's "stitch" strategy)

ALL = (fuse,)
