"""Hot loops (numba / torch / Triton), one file per backend and purpose; no public names."""
