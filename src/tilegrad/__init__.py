"""tilegrad: a deep-learning compiler. Subpackages: `te` (expressions and tensor expressions), `schedule`
(schedules as traces), `loop` (loop IR), `codegen` (C), `runtime` (build, call, time); `tilegrad.build.build`
compiles a schedule into a callable kernel.

Kept free of imports on purpose: timing workers import this package, and each import costs them start-up time.
"""
