"""The vLLM server middleware, driven as raw ASGI (no vLLM, no starlette)."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

import pytest

import constrain
from constrain.integrations.vllm import SPEC_KEY, parse_request, request_args, spec_grammar
from constrain.integrations.vllm_server import ResponseFormatMiddleware, translate_body
from constrain.testing import byte_vocabulary

SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
}
CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8}
COMPLETION = {"model": "m", "prompt": "hi", "max_tokens": 8}
JSON_HEADERS = [(b"content-type", b"application/json"), (b"host", b"localhost")]


@dataclass
class Outcome:
    """What the downstream app received (``scope`` None: never called) and what was sent."""

    scope: dict[str, Any] | None = None
    messages: list[dict[str, Any]] = field(default_factory=list)
    sent: list[dict[str, Any]] = field(default_factory=list)

    @property
    def body(self) -> bytes:
        return b"".join(m.get("body", b"") for m in self.messages if m["type"] == "http.request")

    @property
    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def headers(self) -> dict[bytes, bytes]:
        assert self.scope is not None
        return dict(self.scope["headers"])

    @property
    def status(self) -> int:
        return int(self.sent[0]["status"])

    @property
    def error(self) -> dict[str, Any]:
        assert self.sent[0]["type"] == "http.response.start"
        return dict(json.loads(self.sent[1]["body"]))


def run(
    body: Any,
    path: str = "/v1/chat/completions",
    *,
    method: str = "POST",
    headers: list[tuple[bytes, bytes]] | None = None,
    chunk_size: int | None = None,
    scope_type: str = "http",
    extra: list[dict[str, Any]] | None = None,
) -> Outcome:
    """Send one request through the middleware to a fake app that reads its whole body."""
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    if headers is None:
        headers = [*JSON_HEADERS, (b"content-length", str(len(raw)).encode())]
    step = chunk_size or max(len(raw), 1)
    parts = [raw[i : i + step] for i in range(0, len(raw), step)] or [b""]
    incoming: list[dict[str, Any]] = [
        {"type": "http.request", "body": p, "more_body": i < len(parts) - 1}
        for i, p in enumerate(parts)
    ]
    incoming += extra or [{"type": "http.disconnect"}]
    outcome = Outcome()

    async def receive() -> dict[str, Any]:
        return incoming.pop(0)

    async def send(message: Any) -> None:
        outcome.sent.append(dict(message))

    async def app(scope: Any, receive: Any, send: Any) -> None:
        outcome.scope = dict(scope)
        while True:
            message = dict(await receive())
            outcome.messages.append(message)
            if message["type"] != "http.request" or not message.get("more_body"):
                break
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    scope = {
        "type": scope_type,
        "method": method,
        "path": path,
        "root_path": "",
        "headers": headers,
    }
    asyncio.run(ResponseFormatMiddleware(app)(scope, receive, send))
    return outcome


def spec_of(body: dict[str, Any]) -> str:
    return str(body["vllm_xargs"][SPEC_KEY])


def accepts(spec: str, text: str) -> bool:
    compiled = constrain.Compiler(byte_vocabulary()).compile(spec_grammar(spec))
    m = constrain.Matcher(compiled)
    return m.accept_bytes(text.encode()) and m.is_accepting()


# -- response_format ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "base"), [("/v1/chat/completions", CHAT), ("/v1/completions", COMPLETION)]
)
def test_json_schema_response_format_becomes_the_constrain_spec(
    path: str, base: dict[str, Any]
) -> None:
    fmt = {"type": "json_schema", "json_schema": {"name": "p", "schema": SCHEMA, "strict": True}}
    out = run({**base, "response_format": fmt}, path)
    body = out.json
    assert "response_format" not in body  # vLLM's own backend must not mask it too
    assert body["vllm_xargs"] == request_args(json_schema=SCHEMA)  # what a client would send
    assert {k: v for k, v in body.items() if k != "vllm_xargs"} == base
    assert parse_request(body["vllm_xargs"]) == spec_of(body)
    assert accepts(spec_of(body), '{"name": "Ann", "age": 3}')
    assert not accepts(spec_of(body), '{"name": "Ann"}')
    assert out.status == 200


def test_json_object_response_format_allows_any_object_only() -> None:
    body = run({**CHAT, "response_format": {"type": "json_object"}}).json
    assert "response_format" not in body
    spec = spec_of(body)
    assert spec == request_args(json_schema={"type": "object"})[SPEC_KEY]
    assert accepts(spec, '{"a": [1, {"b": null}], "c": "d"}')
    assert not accepts(spec, "[1, 2]")
    assert not accepts(spec, '"text"')


def test_text_response_format_is_left_to_vllm() -> None:
    sent = {**CHAT, "response_format": {"type": "text"}}
    out = run(sent)
    assert out.json == sent
    assert out.messages[0]["body"] == json.dumps(sent).encode()  # the bytes, untouched


def test_other_vllm_xargs_entries_are_kept() -> None:
    fmt = {"type": "json_schema", "json_schema": {"name": "p", "schema": SCHEMA}}
    body = run({**CHAT, "response_format": fmt, "vllm_xargs": {"other": 3}}).json
    assert body["vllm_xargs"] == {"other": 3, **request_args(json_schema=SCHEMA)}


def test_responses_text_format_is_translated_and_other_text_keys_kept() -> None:
    fmt = {"type": "json_schema", "name": "p", "schema": SCHEMA, "strict": True}
    sent = {"model": "m", "input": "hi", "text": {"format": fmt, "verbosity": "low"}}
    body = run(sent, "/v1/responses").json
    assert body["text"] == {"verbosity": "low"}
    assert body["vllm_xargs"] == request_args(json_schema=SCHEMA)
    body = run({**sent, "text": {"format": {"type": "json_object"}}}, "/v1/responses").json
    assert "text" not in body
    assert spec_of(body) == request_args(json_schema={"type": "object"})[SPEC_KEY]


# -- structured_outputs ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field_value", "expected"),
    [
        ({"regex": r"\d{3}-\d{4}"}, request_args(regex=r"\d{3}-\d{4}")),
        ({"choice": ["red", "green"]}, request_args(choices=["red", "green"])),
        ({"grammar": 'start: "a"+'}, request_args(grammar='start: "a"+')),
        ({"grammar": "json"}, request_args(grammar="json")),
        ({"json": SCHEMA}, request_args(json_schema=SCHEMA)),
        ({"json": json.dumps(SCHEMA)}, request_args(json_schema=SCHEMA)),
        ({"json_object": True}, request_args(json_schema={"type": "object"})),
        (
            {"json": SCHEMA, "disable_any_whitespace": True},
            request_args(json_schema=SCHEMA, json_options={"whitespace": "compact"}),
        ),
    ],
)
def test_structured_outputs_become_the_constrain_spec(
    field_value: dict[str, Any], expected: dict[str, str]
) -> None:
    body = run({**COMPLETION, "structured_outputs": field_value}, "/v1/completions").json
    assert "structured_outputs" not in body
    assert body["vllm_xargs"] == expected


def test_structured_outputs_specs_constrain_as_asked() -> None:
    def spec(value: dict[str, Any]) -> str:
        return spec_of(run({**COMPLETION, "structured_outputs": value}, "/v1/completions").json)

    assert accepts(spec({"regex": r"\d{3}-\d{4}"}), "555-1234")
    assert not accepts(spec({"regex": r"\d{3}-\d{4}"}), "555-12345")
    assert accepts(spec({"choice": ["red", "green"]}), "green")
    assert not accepts(spec({"choice": ["red", "green"]}), "blue")
    compact = spec({"json": SCHEMA, "disable_any_whitespace": True})
    assert accepts(compact, '{"name":"A","age":1}')
    assert not accepts(compact, '{"name": "A", "age": 1}')


@pytest.mark.parametrize(
    "value",
    [
        {"json": SCHEMA, "whitespace_pattern": " ?"},
        {"json": SCHEMA, "disable_additional_properties": True},
        {"json": SCHEMA, "regex": "a"},  # two kinds: vLLM refuses it
        {"json_object": False},
        "not an object",
    ],
)
def test_structured_outputs_constrain_cannot_honour_are_left_to_vllm(value: Any) -> None:
    sent = {**COMPLETION, "structured_outputs": value}
    assert run(sent, "/v1/completions").json == sent


def test_a_request_with_tools_is_left_to_vllm() -> None:
    tools = [{"type": "function", "function": {"name": "f", "parameters": {}}}]
    sent = {**CHAT, "tools": tools, "response_format": {"type": "json_object"}}
    assert run(sent).json == sent
    body = run({**sent, "tool_choice": "none"}).json
    assert "response_format" not in body and SPEC_KEY in body["vllm_xargs"]


# -- HTTP details ------------------------------------------------------------------------------


def test_multi_chunk_body_is_read_whole_and_content_length_fixed() -> None:
    fmt = {"type": "json_schema", "json_schema": {"name": "p", "schema": SCHEMA}}
    sent = {**CHAT, "response_format": fmt}
    out = run(sent, chunk_size=7)
    assert out.json["vllm_xargs"] == request_args(json_schema=SCHEMA)
    assert len(out.messages) == 1 and out.messages[0]["more_body"] is False
    assert out.headers[b"content-length"] == str(len(out.body)).encode()
    assert len(out.body) != len(json.dumps(sent))
    names = [k for k, _ in out.scope["headers"]] if out.scope else []
    assert names.count(b"content-length") == 1
    assert out.headers[b"host"] == b"localhost"


def test_a_chunked_request_gets_a_content_length_instead() -> None:
    raw = json.dumps({**CHAT, "response_format": {"type": "json_object"}}).encode()
    headers = [*JSON_HEADERS, (b"transfer-encoding", b"chunked")]
    out = run(raw, headers=headers, chunk_size=5)
    assert b"transfer-encoding" not in out.headers
    assert out.headers[b"content-length"] == str(len(out.body)).encode()


def test_later_receive_calls_reach_the_client() -> None:
    async def main() -> list[dict[str, Any]]:
        got: list[dict[str, Any]] = []
        sent = {**CHAT, "response_format": {"type": "json_object"}}
        incoming = [
            {"type": "http.request", "body": json.dumps(sent).encode(), "more_body": False},
            {"type": "http.disconnect"},
        ]

        async def receive() -> dict[str, Any]:
            return incoming.pop(0)

        async def app(scope: Any, receive: Any, send: Any) -> None:
            got.append(dict(await receive()))
            got.append(dict(await receive()))  # e.g. vLLM watching for a disconnect

        async def send(message: Any) -> None:
            raise AssertionError("nothing is sent")

        scope = {"type": "http", "method": "POST", "path": "/v1/chat/completions",
                 "headers": JSON_HEADERS}  # fmt: skip
        await ResponseFormatMiddleware(app)(scope, receive, send)
        return got

    got = asyncio.run(main())
    assert [m["type"] for m in got] == ["http.request", "http.disconnect"]
    assert SPEC_KEY in json.loads(got[0]["body"])["vllm_xargs"]  # translated, then the client


def test_conflict_with_a_constrain_vllm_xargs_entry_is_a_400() -> None:
    sent = {
        **CHAT,
        "response_format": {"type": "json_object"},
        "vllm_xargs": request_args(regex="a+"),
    }
    out = run(sent)
    assert out.scope is None  # never reached vLLM
    assert out.status == 400
    error = out.error["error"]
    assert error["type"] == "BadRequestError" and error["code"] == 400
    assert error["param"] == "response_format"
    assert "response_format" in error["message"] and "vllm_xargs['constrain']" in error["message"]
    assert dict(out.sent[0]["headers"])[b"content-type"] == b"application/json"
    sent = {
        **COMPLETION,
        "structured_outputs": {"regex": "a"},
        "vllm_xargs": request_args(regex="a"),
    }
    out = run(sent, "/v1/completions")
    assert out.status == 400 and out.error["error"]["param"] == "structured_outputs"


def test_response_format_and_structured_outputs_together_is_a_400() -> None:
    sent = {
        **CHAT,
        "response_format": {"type": "json_object"},
        "structured_outputs": {"regex": "a"},
    }
    out = run(sent)
    assert out.status == 400 and "not both" in out.error["error"]["message"]


RF = "response_format.json_schema"


@pytest.mark.parametrize(
    ("fmt", "param"),
    [
        ({"type": "json_schema"}, RF),
        ({"type": "json_schema", "json_schema": {"name": "p"}}, RF + ".schema"),
        ({"type": "json_schema", "json_schema": {"schema": "{}"}}, RF + ".schema"),
        ({"type": "json_schema", "json_schema": ["x"]}, RF),
    ],
)
def test_malformed_response_format_is_a_400_naming_the_field(fmt: Any, param: str) -> None:
    out = run({**CHAT, "response_format": fmt})
    assert out.scope is None and out.status == 400
    assert out.error["error"]["param"] == param
    assert out.error["error"]["message"].startswith(param + " must be")


@pytest.mark.parametrize(
    ("value", "param"),
    [
        ({"choice": "red"}, "structured_outputs.choice"),
        ({"choice": ["red", 1]}, "structured_outputs.choice"),
        ({"json": "{not json"}, "structured_outputs.json"),
        ({"json": 3}, "structured_outputs.json"),
        ({"regex": 5}, "structured_outputs.regex"),
        ({"grammar": ["a"]}, "structured_outputs.grammar"),
    ],
)
def test_malformed_structured_outputs_is_a_400_naming_the_field(value: Any, param: str) -> None:
    out = run({**COMPLETION, "structured_outputs": value}, "/v1/completions")
    assert out.scope is None and out.status == 400
    assert out.error["error"]["param"] == param and param in out.error["error"]["message"]


def test_responses_text_format_without_schema_is_a_400() -> None:
    sent = {"model": "m", "input": "hi", "text": {"format": {"type": "json_schema", "name": "p"}}}
    out = run(sent, "/v1/responses")
    assert out.status == 400 and out.error["error"]["param"] == "text.format.schema"


@pytest.mark.parametrize(
    ("body", "kwargs"),
    [
        (b"{not json", {}),
        (b'["a list"]', {}),
        (b"", {}),
        ({**CHAT, "response_format": {"type": "json_object"}}, {"path": "/v1/embeddings"}),
        ({**CHAT, "response_format": {"type": "json_object"}}, {"path": "/v1/models"}),
        ({**CHAT, "response_format": {"type": "json_object"}}, {"method": "GET"}),
        (
            {**CHAT, "response_format": {"type": "json_object"}},
            {"headers": [(b"content-type", b"text/plain")]},
        ),
        ({**CHAT, "response_format": {"type": "json_object"}}, {"headers": []}),
    ],
)
def test_anything_else_reaches_the_app_untouched(body: Any, kwargs: dict[str, Any]) -> None:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    out = run(body, **kwargs)
    assert out.scope is not None and out.body == raw
    assert out.status == 200


def test_a_disconnect_before_the_body_ends_is_replayed_untouched() -> None:
    async def main() -> list[dict[str, Any]]:
        incoming = [
            {"type": "http.request", "body": b'{"model": "m", ', "more_body": True},
            {"type": "http.disconnect"},
        ]
        got: list[dict[str, Any]] = []

        async def receive() -> dict[str, Any]:
            return incoming.pop(0)

        async def app(scope: Any, receive: Any, send: Any) -> None:
            got.append(dict(await receive()))
            got.append(dict(await receive()))

        async def send(message: Any) -> None:
            raise AssertionError("nothing is sent")

        scope = {"type": "http", "method": "POST", "path": "/v1/completions",
                 "headers": JSON_HEADERS}  # fmt: skip
        await ResponseFormatMiddleware(app)(scope, receive, send)
        return got

    got = asyncio.run(main())
    assert got[0] == {"type": "http.request", "body": b'{"model": "m", ', "more_body": True}
    assert got[1] == {"type": "http.disconnect"}


@pytest.mark.parametrize("scope_type", ["websocket", "lifespan"])
def test_other_scope_types_pass_through(scope_type: str) -> None:
    async def main() -> list[str]:
        seen: list[str] = []

        async def app(scope: Any, receive: Any, send: Any) -> None:
            seen.append(scope["type"])
            seen.append((await receive())["type"])

        async def receive() -> dict[str, Any]:
            return {"type": f"{scope_type}.connect"}

        async def send(message: Any) -> None:
            return None

        await ResponseFormatMiddleware(app)({"type": scope_type}, receive, send)
        return seen

    assert asyncio.run(main()) == [scope_type, f"{scope_type}.connect"]


def test_root_path_is_stripped_before_matching() -> None:
    raw = json.dumps({**CHAT, "response_format": {"type": "json_object"}}).encode()
    outcome: dict[str, Any] = {}

    async def main() -> None:
        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": raw, "more_body": False}

        async def app(scope: Any, receive: Any, send: Any) -> None:
            outcome["body"] = (await receive())["body"]

        async def send(message: Any) -> None:
            return None

        scope = {"type": "http", "method": "POST", "path": "/api/v1/chat/completions",
                 "root_path": "/api", "headers": JSON_HEADERS}  # fmt: skip
        await ResponseFormatMiddleware(app)(scope, receive, send)

    asyncio.run(main())
    assert SPEC_KEY in json.loads(outcome["body"])["vllm_xargs"]


def test_translate_body_does_not_modify_its_argument() -> None:
    sent = {**CHAT, "response_format": {"type": "json_object"}, "vllm_xargs": {"k": "v"}}
    before = json.dumps(sent)
    out = translate_body("/v1/chat/completions", sent)
    assert out is not None and json.dumps(sent) == before
    assert translate_body("/v1/chat/completions", CHAT) is None
