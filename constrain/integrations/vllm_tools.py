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

__all__ = ["TOOL_PARSER_FORMATS", "ServerSettings", "server_settings", "tool_request"]

TOOL_PARSER_FORMATS = {"hermes": "hermes", "xlam": "smollm2"}
"""vLLM tool parser (``--tool-call-parser``) -> the :data:`~constrain.tools.TOOL_FORMATS` entry
whose output it parses: ``hermes`` reads one ``<tool_call>\n{...}\n</tool_call>`` per call (Hermes,
Qwen 2.5 and 3), ``xlam`` a JSON list of calls inside ``<tool_call>...</tool_call>`` (SmolLM2's
own format)."""


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
        The body with ``tool_choice`` ``"auto"``, the tools without ``strict`` and no
        ``parallel_tool_calls``, and the structural tag of the calls (the caller sends it as
        ``vllm_xargs["constrain"]``). None when the request stays with vLLM (see the module
        docstring).
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
    try:
        tag = tool_structural_tag(
            [as_tool(t) for t in tools],
            tool_choice=picked,
            parallel=body.get("parallel_tool_calls") is not False,
            format=fmt,
        )
    except (TypeError, ValueError):
        return None  # malformed tools, or a choice naming no tool: vLLM answers
    out = {k: v for k, v in body.items() if k != "parallel_tool_calls"}
    out["tool_choice"] = "auto"
    out["tools"] = [_without_strict(t) for t in tools]
    return out, tag


def _without_strict(tool: Any) -> Any:
    """Return an OpenAI tool dict without ``strict`` (vLLM would add its own tag for it)."""
    fn = tool.get("function") if isinstance(tool, Mapping) else None
    if not isinstance(fn, Mapping) or "strict" not in fn:
        return tool
    return {**tool, "function": {k: v for k, v in fn.items() if k != "strict"}}
