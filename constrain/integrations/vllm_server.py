r"""vLLM's OpenAI server: ``response_format`` and ``structured_outputs`` served by constrain.

Stage 6 (masking) inside a serving engine, request side. vLLM 0.32 sends ``response_format`` and
its ``structured_outputs`` field to its built-in structured-output backends, which have no plug-in
point; its server does take ASGI middleware (``--middleware module.Class``). This middleware
rewrites a request's body before vLLM parses it: the structured-output field becomes the
``vllm_xargs={"constrain": ...}`` entry that :class:`constrain.integrations.vllm.LogitsProcessor`
serves (the same canonical text :func:`~constrain.integrations.vllm.request_args` builds), and
the field is removed, so vLLM's own backend does not mask the request too::

    python -m vllm.entrypoints.openai.api_server --model MODEL \
        --logits-processors constrain.integrations.vllm:LogitsProcessor \
        --middleware constrain.integrations.vllm_server.ResponseFormatMiddleware

Neither vLLM nor starlette is imported: the middleware is plain ASGI. What it translates
(:data:`PATHS` only, POST with a JSON body):

* ``response_format`` ``{"type": "json_schema", "json_schema": {"schema": S}}`` ->
  ``{"json_schema": S}``; ``{"type": "json_object"}`` -> ``{"json_schema": {"type": "object"}}``; on
  ``/v1/responses`` the same types under ``text.format`` (``{"type": "json_schema", "schema":
  S}``);
* ``response_format`` ``{"type": "structural_tag", "format": ...}`` (or the legacy
  ``{"type": "structural_tag", "structures": [...], "triggers": [...]}``) ->
  ``{"structural_tag": ...}`` (:meth:`~constrain.Grammar.from_structural_tag`);
* ``structured_outputs`` ``json`` (a schema or its JSON text), ``json_object: true``,
  ``regex``, ``choice``, ``grammar`` (Lark text, or a shipped grammar's name),
  ``structural_tag`` (the tag or its JSON text) -> ``json_schema``, ``regex``, ``choices``,
  ``grammar``, ``structural_tag``; ``disable_any_whitespace: true`` ->
  ``json_options={"whitespace": "compact"}``;
* on ``/v1/chat/completions``, ``tools`` with ``tool_choice`` ``"required"`` or a named function,
  on a server whose tool parser constrain writes for (:mod:`constrain.integrations.vllm_tools`):
  the calls' structural tag, with ``tool_choice`` turned ``"auto"`` so vLLM's tool parser reads
  the output; ``vllm_xargs`` ``constrain_max_items`` / ``constrain_max_length`` bound the
  tools' open arrays and strings (opt-in).

Everything else is passed on untouched, for vLLM to serve or refuse: ``{"type": "text"}``,
``structured_outputs`` with ``whitespace_pattern`` or ``disable_additional_properties`` (which
constrain has no option for), other requests with ``tools`` (``tool_choice`` ``"auto"``: vLLM's
tool parsers merge the format with tool-call tags), bodies that are not a JSON object.
A malformed field, or a structured-output field next to a ``vllm_xargs["constrain"]`` entry (or
both ``response_format`` and ``structured_outputs``), is answered with HTTP 400 in vLLM's error
shape; whether constrain can enforce the spec is checked later, at vLLM's admission (also 400).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from typing import Any

from constrain.integrations.vllm import SPEC_KEY, request_args
from constrain.integrations.vllm_tools import (
    FieldError,
    ServerSettings,
    server_settings,
    tool_request,
)

__all__ = ["PATHS", "ResponseFormatMiddleware", "translate_body"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

PATHS = frozenset(
    {"/v1/chat/completions", "/v1/chat/completions/batch", "/v1/completions", "/v1/responses"}
)
"""The endpoints whose requests are translated (vLLM 0.32's generation endpoints with formats)."""

_OBJECT_SCHEMA = {"type": "object"}  # response_format json_object: any JSON object
_KINDS = ("json", "regex", "choice", "grammar", "json_object", "structural_tag")
_LOG = logging.getLogger(__name__)


def translate_body(
    path: str, body: Mapping[str, Any], settings: ServerSettings | None = None
) -> dict[str, Any] | None:
    """Return a request body with its structured-output field moved to ``vllm_xargs``.

    Parameters
    ----------
    path : str
        The endpoint, one of :data:`PATHS` (``/v1/responses`` reads ``text.format``, the others
        ``response_format``).
    body : mapping
        The parsed JSON body; not modified.
    settings : ServerSettings, optional
        The server's tool parser and options (:func:`~constrain.integrations.vllm_tools.
        server_settings`); without them requests with tools stay with vLLM.

    Returns
    -------
    dict or None
        A new body without the translated field and with ``vllm_xargs["constrain"]`` set (other
        ``vllm_xargs`` entries kept), or None when the body has nothing constrain should serve.

    Raises
    ------
    ValueError
        If a structured-output field or a tool request's bound
        (``vllm_xargs["constrain_max_items"]``, ...) is malformed, or a field is set together
        with another one or with ``vllm_xargs["constrain"]``; the exception
        (:class:`~constrain.integrations.vllm_tools.FieldError`) has ``param`` naming the field.
    """
    tools = body.get("tools")
    if tools and body.get("tool_choice") != "none":
        rewritten = None
        if path == "/v1/chat/completions":
            rewritten = tool_request(body, settings or ServerSettings())
        if rewritten is None:
            return None  # vLLM's tool parsers combine the format with the tool-call tags
        out, tag = rewritten
        return _with_spec(out, request_args(structural_tag=tag)[SPEC_KEY], "tool_choice")
    responses = path == "/v1/responses"
    format_name = "text.format" if responses else "response_format"
    if responses:
        text = body.get("text")
        fmt = text.get("format") if isinstance(text, Mapping) else None
    else:
        fmt = body.get("response_format")
    so = body.get("structured_outputs")
    from_format = _format_spec(fmt, format_name, flat=responses)
    from_so = _structured_outputs_spec(so)
    uses_format = fmt is not None and not (isinstance(fmt, Mapping) and fmt.get("type") == "text")
    if uses_format and so is not None:
        if from_format is not None and from_so is not None:
            raise FieldError(
                "structured_outputs", f"send either {format_name} or structured_outputs, not both"
            )
        return None  # a combination with a part constrain does not serve: vLLM judges it
    spec = from_format if uses_format else from_so
    if spec is None:
        return None  # nothing to translate, or something vLLM's own backend serves
    xargs = body.get("vllm_xargs")
    if xargs is None:
        xargs = {}
    elif not isinstance(xargs, Mapping):
        return None  # vLLM refuses it
    field = format_name if uses_format else "structured_outputs"
    _check_xargs(xargs, field)
    out = dict(body)
    if not uses_format:
        del out["structured_outputs"]
    elif responses:
        rest = {k: v for k, v in out["text"].items() if k != "format"}
        if rest:
            out["text"] = rest
        else:
            del out["text"]
    else:
        del out["response_format"]
    out["vllm_xargs"] = {**xargs, SPEC_KEY: spec}
    return out


def _check_xargs(xargs: Mapping[str, Any], field: str) -> None:
    """Refuse a translated field next to a ``vllm_xargs["constrain"]`` entry."""
    if SPEC_KEY in xargs:
        raise FieldError(
            field, f"send the constraint either as {field} or as vllm_xargs[{SPEC_KEY!r}], not both"
        )


def _with_spec(body: dict[str, Any], spec: str, field: str) -> dict[str, Any] | None:
    """Return ``body`` with ``vllm_xargs["constrain"]`` set, or None if its xargs are invalid."""
    xargs = body.get("vllm_xargs")
    if xargs is None:
        xargs = {}
    elif not isinstance(xargs, Mapping):
        return None  # vLLM refuses it
    _check_xargs(xargs, field)
    return {**body, "vllm_xargs": {**xargs, SPEC_KEY: spec}}


def _format_spec(fmt: Any, name: str, *, flat: bool) -> str | None:
    """Return the spec text of a ``response_format`` (``text.format`` if ``flat``), or None."""
    if not isinstance(fmt, Mapping):
        return None
    kind = fmt.get("type")
    if kind == "json_object":
        return request_args(json_schema=_OBJECT_SCHEMA)[SPEC_KEY]
    if kind == "structural_tag":  # the whole object is the tag (current or legacy form)
        return request_args(structural_tag=fmt)[SPEC_KEY]
    if kind != "json_schema":
        return None  # "text": unconstrained
    if flat:
        holder: Any = fmt
    else:
        holder = fmt.get("json_schema")
        name += ".json_schema"
        if not isinstance(holder, Mapping):
            raise FieldError(
                name,
                f'{name} must be an object such as {{"name": "...", "schema": {{...}}}}, '
                f"got {'nothing' if holder is None else type(holder).__name__}",
            )
    schema = holder.get("schema")
    if not isinstance(schema, (dict, bool)):
        got = "nothing" if schema is None else type(schema).__name__
        raise FieldError(f"{name}.schema", f"{name}.schema must be a JSON Schema, got {got}")
    return request_args(json_schema=schema)[SPEC_KEY]


def _structured_outputs_spec(so: Any) -> str | None:
    """Return the spec text of vLLM's ``structured_outputs`` field, or None to leave it."""
    if not isinstance(so, Mapping):
        return None
    kinds = [k for k in _KINDS if so.get(k) is not None]
    if (
        len(kinds) != 1
        or so.get("whitespace_pattern") is not None
        or so.get("disable_additional_properties")
        or (kinds[0] == "json_object" and so["json_object"] is not True)
    ):
        return None  # vLLM's backend serves it, or vLLM refuses it
    kind = kinds[0]
    value = so[kind]
    param = f"structured_outputs.{kind}"
    if kind in ("json", "json_object"):
        schema = _OBJECT_SCHEMA if kind == "json_object" else value
        if isinstance(schema, str):
            try:
                schema = json.loads(schema)
            except ValueError as err:
                raise FieldError(param, f"{param} is not JSON text: {err}") from err
        if not isinstance(schema, (dict, bool)):
            raise FieldError(
                param, f"{param} must be a JSON Schema (object or JSON text), got "
                f"{type(schema).__name__}"
            )  # fmt: skip
        compact = {"whitespace": "compact"} if so.get("disable_any_whitespace") else None
        return request_args(json_schema=schema, json_options=compact)[SPEC_KEY]
    if kind == "structural_tag":
        tag = value
        if isinstance(tag, str):
            try:
                tag = json.loads(tag)
            except ValueError as err:
                raise FieldError(param, f"{param} is not JSON text: {err}") from err
        if not isinstance(tag, Mapping):
            raise FieldError(param, f"{param} must be a structural tag object or its JSON text")
        return request_args(structural_tag=tag)[SPEC_KEY]
    if kind == "choice":
        if not isinstance(value, list) or not all(isinstance(c, str) for c in value):
            raise FieldError(param, f"{param} must be a list of strings")
        return request_args(choices=value)[SPEC_KEY]
    if not isinstance(value, str):
        raise FieldError(param, f"{param} must be a string, got {type(value).__name__}")
    if kind == "regex":
        return request_args(regex=value)[SPEC_KEY]
    return request_args(grammar=value)[SPEC_KEY]


class ResponseFormatMiddleware:
    """ASGI middleware: vLLM serves ``response_format`` / ``structured_outputs`` with constrain.

    Load it with ``--middleware constrain.integrations.vllm_server.ResponseFormatMiddleware``
    next to ``--logits-processors constrain.integrations.vllm:LogitsProcessor`` (without the
    processor the translated requests would be unconstrained). For a POST to one of
    :data:`PATHS` with ``Content-Type: application/json`` the whole body is read (all its
    ``http.request`` chunks), rewritten by :func:`translate_body` when it has a field to
    translate (``Content-Length`` updated), and replayed to the app; a malformed field is
    answered with HTTP 400 ``{"error": {"message", "type": "BadRequestError", "param", "code":
    400}}`` (vLLM's ``ErrorResponse``). Other requests, other scope types (``websocket``,
    ``lifespan``) and bodies that are not a JSON object reach the app untouched.

    Parameters
    ----------
    app : ASGI application
        The application to wrap (vLLM's FastAPI app, given by ``app.add_middleware``).
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Translate a matching request's body, then call the app (or answer 400)."""
        path = _route(scope)
        if path is None:
            await self.app(scope, receive, send)
            return
        messages: list[Message] = []
        chunks: list[bytes] = []
        complete = False
        while True:
            message = await receive()
            messages.append(message)
            if message.get("type") != "http.request":  # e.g. http.disconnect: replay as is
                break
            chunks.append(bytes(message.get("body", b"")))
            if not message.get("more_body", False):
                complete = True
                break
        out = None
        if complete:
            try:
                out = _rewrite(path, b"".join(chunks), server_settings(scope))
            except FieldError as err:
                await _bad_request(send, str(err), err.param)
                return
        if out is not None:
            messages = [{"type": "http.request", "body": out, "more_body": False}]
            headers = [
                (k, v)
                for k, v in scope.get("headers", [])
                if bytes(k).lower() not in (b"content-length", b"transfer-encoding")
            ]
            headers.append((b"content-length", str(len(out)).encode("ascii")))
            scope = dict(scope, headers=headers)

        async def replay() -> Message:
            if messages:
                return messages.pop(0)
            return await receive()

        await self.app(scope, replay, send)


def _route(scope: Scope) -> str | None:
    """Return the endpoint of a request the middleware reads, or None for any other."""
    if scope.get("type") != "http" or scope.get("method") != "POST":
        return None
    path = str(scope.get("path", ""))
    root = str(scope.get("root_path", ""))
    if root and path.startswith(root):  # ASGI paths include the root path (--root-path)
        path = path[len(root) :]
    if path not in PATHS:
        return None
    for key, value in scope.get("headers", []):
        if bytes(key).lower() == b"content-type":
            media_type = bytes(value).split(b";", 1)[0].strip().lower()
            return path if media_type == b"application/json" else None
    return None


def _rewrite(path: str, raw: bytes, settings: ServerSettings) -> bytes | None:
    """Return the translated body, or None to pass the original bytes on."""
    try:
        body = json.loads(raw)
    except ValueError:
        return None  # vLLM answers a body that is not JSON
    if not isinstance(body, dict):
        return None
    out = translate_body(path, body, settings)
    if out is None:
        return None
    _LOG.debug("constrain: %s request served through vllm_xargs[%r]", path, SPEC_KEY)
    return json.dumps(out, ensure_ascii=False).encode("utf-8")


async def _bad_request(send: Send, message: str, param: str) -> None:
    """Answer HTTP 400 with vLLM's error body."""
    error = {"message": message, "type": "BadRequestError", "param": param, "code": 400}
    payload = json.dumps({"error": error}).encode("utf-8")
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(payload))]
    await send({"type": "http.response.start", "status": 400, "headers": headers})
    await send({"type": "http.response.body", "body": payload, "more_body": False})
