"""The decoding methods ``generate(sampler=...)`` knows by name (stage 7b).

Each name maps to a factory (:class:`~constrain.decoding.method.MethodFactory`) that builds the
method from ``generate``'s sampling options (``temperature``, ``top_k``, ``top_p``) and the
method's own keyword options, which it validates. Adding a method is one module (the method
object, with ``name``, ``run_job`` and a factory) and one line in :data:`_FACTORIES`, or, from
outside the library, one call to :func:`register_method`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from constrain.decoding.asap import NamedASAp
from constrain.decoding.autoregressive import (
    TokenMethod,
    awrs_method,
    greedy_method,
    masked_method,
)
from constrain.decoding.dccd import DCCD
from constrain.decoding.method import DecodingMethod, MethodFactory, SamplingOptions
from constrain.decoding.smc import SMC
from constrain.sampling.base import Sampler
from constrain.sampling.masked import MaskedSampler

__all__ = ["build_method", "method_names", "register_method", "resolve_method"]

_FACTORIES: dict[str, MethodFactory] = {
    "greedy": greedy_method,
    "masked": masked_method,
    "awrs": awrs_method,
    "smc": SMC.from_options,
    "asap": NamedASAp.from_options,
    "dccd": DCCD.from_options,
}


def method_names() -> tuple[str, ...]:
    """Return the registered method names, in registration order."""
    return tuple(_FACTORIES)


def register_method(name: str, factory: MethodFactory) -> None:
    """Make ``generate(sampler=name, **options)`` build its method with ``factory``.

    Parameters
    ----------
    name : str
        The method's name (matched case-insensitively).
    factory : MethodFactory
        ``factory(sampling, options) -> DecodingMethod``; it raises ``TypeError`` for an
        option the method does not take.

    Raises
    ------
    ValueError
        If ``name`` is already registered.
    """
    key = name.lower()
    if key in _FACTORIES:
        raise ValueError(f"a decoding method named {name!r} is already registered")
    _FACTORIES[key] = factory


def build_method(
    name: str, sampling: SamplingOptions, options: Mapping[str, Any]
) -> DecodingMethod:
    """Build the method registered as ``name`` (case-insensitive).

    Parameters
    ----------
    name : str
        One of :func:`method_names`.
    sampling : SamplingOptions
        ``generate``'s ``temperature``, ``top_k`` and ``top_p``.
    options : mapping
        The method's own keyword options (e.g. ``n_particles`` for ``"smc"``).

    Returns
    -------
    DecodingMethod

    Raises
    ------
    ValueError
        For an unknown name (the message lists the registered ones), or an option value the
        method rejects.
    TypeError
        For an option the method does not take (the message names the method).
    """
    factory = _FACTORIES.get(name.lower())
    if factory is None:
        raise ValueError(f"unknown sampler {name!r}; choose one of {', '.join(_FACTORIES)}")
    try:
        return factory(sampling, options)
    except TypeError as err:
        raise TypeError(f"sampler={name!r}: {err}") from err


def resolve_method(
    sampler: object, sampling: SamplingOptions, options: Mapping[str, Any]
) -> DecodingMethod:
    """Resolve ``generate``'s ``sampler=`` (a name, a method or sampler object, or None).

    Parameters
    ----------
    sampler : str, DecodingMethod, Sampler or None
        ``None``: a :class:`~constrain.sampling.MaskedSampler` with ``sampling`` (greedy at
        temperature 0); a name: :func:`build_method`; a
        :class:`~constrain.decoding.method.DecodingMethod` (``SMC``, ``ASAp``, ``DCCD``):
        itself; a token-level :class:`~constrain.sampling.Sampler`: run by the
        autoregressive loop.
    sampling : SamplingOptions
        ``generate``'s ``temperature``, ``top_k`` and ``top_p``.
    options : mapping
        Keyword options; only with a method given by name.

    Returns
    -------
    DecodingMethod

    Raises
    ------
    TypeError
        For options given with a sampler that is not a name, an option the named method does
        not take, or a ``sampler`` of another type.
    ValueError
        For an unknown name or an option value the method rejects.
    """
    if isinstance(sampler, str):
        return build_method(sampler, sampling, options)
    if options:
        raise TypeError(
            f"unexpected keyword arguments {sorted(options)}: options by keyword only apply "
            f"with a sampler given by name (sampler={method_names()})"
        )
    if sampler is None:
        return TokenMethod(
            MaskedSampler(sampling.temperature, top_k=sampling.top_k, top_p=sampling.top_p)
        )
    if isinstance(sampler, DecodingMethod):
        return sampler
    if isinstance(sampler, Sampler):
        return TokenMethod(sampler)
    raise TypeError(
        f"sampler= must be a method name ({', '.join(_FACTORIES)}), a decoding method (SMC, "
        f"ASAp, DCCD), a token-level Sampler or None, got {type(sampler).__name__}"
    )
