"""This machine's measured peaks (float32 FMA GFLOP/s, memory GB/s), cached per CPU, ISA and thread count.

The public name of `runtime/peaks.py`, where the measurement lives beside the build and timing code it uses (the
runtime's profiler reads it there). `tilegrad info --machine` prints them.
"""

from .runtime.peaks import MachinePeaks as MachinePeaks
from .runtime.peaks import cache_path as cache_path
from .runtime.peaks import measured_peaks as measured_peaks
