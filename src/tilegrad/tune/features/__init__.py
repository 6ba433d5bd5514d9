"""Program features: per-store feature vectors read from the loop IR (`extract.py`), the buffer-access analysis
they rest on (`access.py`), and the same features as formulas of a sketch's parameters (`formulas.py`)."""
