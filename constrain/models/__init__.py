"""Models trained by this project and shipped with it (weights as package data).

- :mod:`constrain.models.tiny_diffusion`: :class:`TinyDiffusionLM`, a byte-level
  masked-diffusion LM of 0.7M parameters (``load_tiny_diffusion()``), trained by
  ``benchmarks/train_diffusion.py``;
- :mod:`constrain.models.corpus`: its synthetic training corpus and the constraint of each task.

Importing this package imports torch.
"""

from constrain.models.tiny_diffusion import TinyDiffusionLM, load_tiny_diffusion

__all__ = ["TinyDiffusionLM", "load_tiny_diffusion"]
