r"""vLLM's OpenAI server: tool calls with ``tool_choice`` "required" or named, served by constrain.

Stage 6 (masking) inside a serving engine, request side (used by
:class:`constrain.integrations.vllm_server.ResponseFormatMiddleware`). vLLM 0.32 builds the
grammar of a tool request itself (its tool parser's structural tag, or a JSON array of calls)
and hands it to its own structured-output backend. On a server started with
``--enable-auto-tool-choice --tool-call-parser P`` where ``P`` is in :data:`TOOL_PARSER_FORMATS`,
a ``/v1/chat/completions`` request with ``tools`` and ``tool_choice`` ``"required"`` or
``{"type": "function", "function": {"name": ...}}`` is rewritten instead:

* the calls become :func:`constrain.tools.tool_structural_tag` in the :data:`TOOL_FORMATS
  <constrain.tools.TOOL_FORMATS>` entry that parser reads (only each tool's arguments follow
  its schema; ``parallel_tool_calls: false`` allows one call), sent as
  ``vllm_xargs={"constrain": '{"structural_tag": ...}'}`` to constrain's logits processor;
* ``tool_choice`` becomes ``"auto"``, and ``parallel_tool_calls`` and the tools' ``strict``
  flags are dropped, so vLLM adds no grammar of its own and reads the output with its tool
  parser, as for any ``"auto"`` request: the calls come back in ``message.tool_calls``.

Opt-in bounds (:data:`BOUND_KEYS`): ``vllm_xargs={"constrain_max_items": N,
"constrain_max_length": M}`` bound the arrays and strings the tools' schemas leave open, as
``generate(tools=..., json_options={"max_items": N, "max_length": M})`` does offline
(``tool_structural_tag(max_items=, max_length=)``); the middleware consumes the two entries.
vLLM 0.32 passes ``vllm_xargs`` (string and number values) through to ``SamplingParams.extra_args``
untouched, so a request sent to a server without the middleware, or one left to vLLM, keeps them
and nothing reads them. Without them the schemas are used as given.

Left to vLLM (the body passes untouched): ``tool_choice`` ``"auto"`` or absent, a server
without ``--enable-auto-tool-choice``, with another tool parser, or with
``--tool-strict-level`` above ``auto`` (vLLM then adds its own tag to every tool request), a
request that also sets ``response_format`` or ``structured_outputs``, and malformed tools or a
``tool_choice`` naming no tool (vLLM answers them).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from constrain.tools import as_tool, tool_structural_tag

__all__ = [
    "BOUND_KEYS",
    "TOOL_PARSER_FORMATS",
    "FieldError",
    "ServerSettings",
    "server_settings",
    "tool_bounds",
    "tool_request",
]

TOOL_PARSER_FORMATS = {"hermes": "hermes", "xlam": "smollm2"}
"""vLLM tool parser (``--tool-call-parser``) -> the :data:`~constrain.tools.TOOL_FORMATS` entry
whose output it parses: ``hermes`` reads one ``<tool_call>\n{...}\n</tool_call>`` per call (Hermes,
Qwen 2.5 and 3), ``xlam`` a JSON list of calls inside ``<tool_call>...</tool_call>`` (SmolLM2's
own format)."""

BOUND_KEYS = {"constrain_max_items": "max_items", "constrain_max_length": "max_length"}
"""``vllm_xargs`` entry of a tool request -> the :func:`~constrain.tools.tool_structural_tag`
argument it sets (a positive int: the most items of an array, characters of a string, where a
tool's schema sets no ``maxItems`` / ``maxLength``)."""


class FieldError(ValueError):
    """A malformed request field, answered with HTTP 400; ``param`` names it.

    ``param`` is what vLLM's error body calls ``ErrorInfo.param`` (``"structured_outputs.json"``,
    ``"vllm_xargs.constrain_max_items"``, ...).
    """

    def __init__(self, param: str, message: str) -> None:
        super().__init__(message)
        self.param = param


@dataclass(frozen=True)
class ServerSettings:
    """The vLLM server options the middleware reads (from ``app.state.args``)."""

    tool_call_parser: str | None = None
    enable_auto_tool_choice: bool = False
    tool_strict_level: str = "auto"

    @property
    def tool_format(self) -> str | None:
        """The tool format constrain writes calls in, or None to leave tool requests to vLLM."""
        if not self.enable_auto_tool_choice or self.tool_strict_level.lower() != "auto":
            return None
        return TOOL_PARSER_FORMATS.get(self.tool_call_parser or "")


def server_settings(scope: Mapping[str, Any]) -> ServerSettings:
    """Return the settings of the vLLM server an ASGI request reached.

    Starlette puts the application in ``scope["app"]``; vLLM keeps its command-line arguments in
    ``app.state.args``. Without them (another server, a test) tool requests stay with vLLM.
    """
    args = getattr(getattr(scope.get("app"), "state", None), "args", None)
    if args is None:
        return ServerSettings()
    return ServerSettings(
        tool_call_parser=getattr(args, "tool_call_parser", None) or None,
        enable_auto_tool_choice=bool(getattr(args, "enable_auto_tool_choice", False)),
        tool_strict_level=str(getattr(args, "tool_strict_level", "auto") or "auto"),
    )


def tool_bounds(xargs: Any) -> dict[str, int]:
    """Return the bounds a request's ``vllm_xargs`` asks for, as ``tool_structural_tag`` kwargs.

    Parameters
    ----------
    xargs : any
        The request's ``vllm_xargs``; a value that is not a mapping has no bounds (vLLM refuses
        it).

    Returns
    -------
    dict
        ``{"max_items": N, "max_length": M}`` with the entries of :data:`BOUND_KEYS` that are
        set; empty when none is.

    Raises
    ------
    FieldError
        If an entry is not a positive int (``param`` names it).
    """
    if not isinstance(xargs, Mapping):
        return {}
    bounds: dict[str, int] = {}
    for key, name in BOUND_KEYS.items():
        value = xargs.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise FieldError(
                f"vllm_xargs.{key}", f"vllm_xargs[{key!r}] must be a positive int, got {value!r}"
            )
        bounds[name] = value
    return bounds


def tool_request(
    body: Mapping[str, Any], settings: ServerSettings
) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """Return a tool request rewritten for constrain and its calls' tag, or None for vLLM.

    Parameters
    ----------
    body : mapping
        A ``/v1/chat/completions`` body; not modified.
    settings : ServerSettings
        The server's tool parser and options.

    Returns
    -------
    (dict, dict) or None
        The body with ``tool_choice`` ``"auto"``, the tools without ``strict``, no
        ``parallel_tool_calls`` and no :data:`BOUND_KEYS` entries in ``vllm_xargs``, and the
        structural tag of the calls, bounded as those entries ask (the caller sends it as
        ``vllm_xargs["constrain"]``). None when the request stays with vLLM (see the module
        docstring).

    Raises
    ------
    FieldError
        If a :data:`BOUND_KEYS` entry of a request constrain serves is not a positive int.
    """
    tools, choice = body.get("tools"), body.get("tool_choice")
    fmt = settings.tool_format
    if fmt is None or not isinstance(tools, list) or not tools:
        return None
    picked: Any = choice
    if isinstance(choice, Mapping) and choice.get("type", "function") == "function":
        function = choice.get("function")
        picked = {"name": function.get("name") if isinstance(function, Mapping) else None}
    elif choice != "required":
        return None
    if body.get("response_format") is not None or body.get("structured_outputs") is not None:
        return None  # vLLM ignores them next to a forced call: its own path decides
    xargs = body.get("vllm_xargs")
    bounds = tool_bounds(xargs)
    try:
        tag = tool_structural_tag(
            [as_tool(t) for t in tools],
            tool_choice=picked,
            parallel=body.get("parallel_tool_calls") is not False,
            format=fmt,
            max_items=bounds.get("max_items"),
            max_length=bounds.get("max_length"),
        )
    except (TypeError, ValueError):
        return None  # malformed tools, or a choice naming no tool: vLLM answers
    out = {k: v for k, v in body.items() if k != "parallel_tool_calls"}
    out["tool_choice"] = "auto"
    out["tools"] = [_without_strict(t) for t in tools]
    if isinstance(xargs, Mapping) and any(k in xargs for k in BOUND_KEYS):
        out["vllm_xargs"] = {k: v for k, v in xargs.items() if k not in BOUND_KEYS}
    return out, tag


def _without_strict(tool: Any) -> Any:
    """Return an OpenAI tool dict without ``strict`` (vLLM would add its own tag for it)."""
    fn = tool.get("function") if isinstance(tool, Mapping) else None
    if not isinstance(fn, Mapping) or "strict" not in fn:
        return tool
    return {**tool, "function": {k: v for k, v in fn.items() if k != "strict"}}
