"""Felix's differentiable objective: feature formulas made smooth (`smooth.py`) and compiled into a tape that
evaluates them and their gradient in batches (`tape.py`)."""
