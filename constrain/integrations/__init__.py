"""Integrations with model libraries (the only modules that import ``transformers``)."""
