"""Runtime: build C source into shared libraries, call kernels with NumPy arrays, time them."""

from .build import assemble as assemble
from .build import build as build
from .build import compiler_identity as compiler_identity
from .build import find_compiler as find_compiler
from .kernel import BufferSpec as BufferSpec
from .kernel import Kernel as Kernel
from .kernel import random_arguments as random_arguments
from .timing import TimingResult as TimingResult
from .timing import time_kernel as time_kernel
