"""constrain behind vLLM's OpenAI-compatible server (`vllm serve`), on localhost.

The server (the `server` fixture of conftest.py) loads constrain's logits processor and its
middleware, so both `vllm_xargs` and vLLM's own `response_format` / `structured_outputs` fields
are served by constrain.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import jsonschema
import pytest
from vllm_cases import COLORS, ITEM_SCHEMA, PHONE, REFUSED_SCHEMA, Person, cases, check, post

from constrain.integrations.vllm import request_args

# a pydantic model's schema as OpenAI's strict mode sends it (objects closed)
PERSON = {**Person.model_json_schema(), "additionalProperties": False}


def _completion(base: str, prompt: str, xargs: dict[str, str] | None, seed: int) -> Any:
    body: dict[str, Any] = {
        "model": "smollm2",
        "prompt": prompt,
        "max_tokens": 48,
        "temperature": 0.8,
        "seed": seed,
    }
    if xargs is not None:
        body["vllm_xargs"] = xargs
    return post(base, "/v1/completions", body)


def test_concurrent_mixed_requests_valid(server: str) -> None:
    batch = cases()
    with ThreadPoolExecutor(len(batch)) as pool:
        futures = [
            pool.submit(_completion, server, prompt, xargs, seed)
            for seed, (_, prompt, xargs) in enumerate(batch)
        ]
        results = [f.result() for f in futures]
    for (name, _, xargs), (status, body) in zip(batch, results, strict=True):
        assert status == 200, body
        choice = body["choices"][0]
        if xargs is not None:
            assert choice["finish_reason"] == "stop", (name, choice["text"])
            check(name, choice["text"])


def test_chat_completion_with_the_openai_client(server: str) -> None:
    openai = pytest.importorskip("openai")
    client = openai.OpenAI(base_url=f"{server}/v1", api_key="unused")
    resp = client.chat.completions.create(
        model="smollm2",
        messages=[{"role": "user", "content": "What fruit is in the basket? Answer in JSON."}],
        max_tokens=48,
        temperature=0.0,
        extra_body={"vllm_xargs": request_args(json_schema=ITEM_SCHEMA)},
    )
    check("schema", resp.choices[0].message.content or "")


def test_refused_schema_is_a_400_and_the_server_keeps_serving(server: str) -> None:
    status, body = _completion(server, "Say a word.", request_args(json_schema=REFUSED_SCHEMA), 0)
    assert status == 400, body
    message = json.dumps(body)
    assert "constrain refused" in message and "lookahead" in message, message
    status, body = _completion(server, "Phone number:", request_args(regex=r"\d{3}-\d{4}"), 1)
    assert status == 200, body
    check("regex", body["choices"][0]["text"])


# -- vLLM's own structured-output fields, through constrain.integrations.vllm_server ---------------


def _schema_format(name: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}


def _chat(base: str, content: str, extra: dict[str, Any], seed: int) -> Any:
    body = {
        "model": "smollm2",
        "messages": [{"role": "user", "content": content}],
        "max_tokens": 48,
        "temperature": 0.8,
        "seed": seed,
        **extra,
    }
    return post(base, "/v1/chat/completions", body)


def test_response_format_json_schema_with_the_openai_client(server: str) -> None:
    openai = pytest.importorskip("openai")
    client = openai.OpenAI(base_url=f"{server}/v1", api_key="unused")
    resp = client.chat.completions.create(
        model="smollm2",
        messages=[{"role": "user", "content": "What fruit is in the basket? Answer in JSON."}],
        max_tokens=48,
        temperature=0.0,
        response_format=_schema_format("item", ITEM_SCHEMA),  # type: ignore[arg-type]
    )
    choice = resp.choices[0]
    assert choice.finish_reason == "stop", choice.message.content
    jsonschema.validate(json.loads(choice.message.content or ""), ITEM_SCHEMA)


def test_structured_outputs_regex_and_choice_on_completions(server: str) -> None:
    body = {"model": "smollm2", "max_tokens": 16, "temperature": 0.8}
    status, out = post(
        server,
        "/v1/completions",
        {**body, "prompt": "Phone number:", "seed": 3, "structured_outputs": {"regex": PHONE}},
    )
    assert status == 200, out
    check("regex", out["choices"][0]["text"])
    status, out = post(
        server,
        "/v1/completions",
        {**body, "prompt": "A color:", "seed": 4, "structured_outputs": {"choice": COLORS}},
    )
    assert status == 200, out
    check("choices", out["choices"][0]["text"])


def test_refused_response_format_is_a_400_from_constrain_and_the_server_keeps_serving(
    server: str,
) -> None:
    status, body = _chat(
        server, "Say a word.", {"response_format": _schema_format("w", REFUSED_SCHEMA)}, 0
    )
    assert status == 400, body
    message = json.dumps(body)
    assert "constrain refused" in message and "lookahead" in message, message
    status, body = _chat(server, "Say hi.", {"response_format": {"type": "json_schema"}}, 0)
    assert status == 400 and body["error"]["param"] == "response_format.json_schema", body
    status, body = _chat(
        server, "Describe a person as JSON.", {"response_format": _schema_format("p", PERSON)}, 1
    )
    assert status == 200, body
    check("pydantic", body["choices"][0]["message"]["content"])


def test_concurrent_mix_of_response_format_structured_outputs_and_free_requests(
    server: str,
) -> None:
    def completion(prompt: str, extra: dict[str, Any], seed: int) -> Any:
        body = {"model": "smollm2", "prompt": prompt, "max_tokens": 48, "temperature": 0.8}
        return post(server, "/v1/completions", {**body, "seed": seed, **extra})

    jobs: list[tuple[str | None, Any, tuple[Any, ...]]] = [
        ("schema", _chat, (server, "What fruit? Answer in JSON.",
                           {"response_format": _schema_format("item", ITEM_SCHEMA)}, 10)),
        ("pydantic", completion, ("A person as JSON:",
                                  {"response_format": _schema_format("p", PERSON)}, 11)),
        ("object", _chat, (server, "Any JSON object.",
                           {"response_format": {"type": "json_object"}, "max_tokens": 96}, 12)),
        (None, _chat, (server, "Tell me about the sea.", {}, 13)),
        ("regex", completion, ("Phone:", {"structured_outputs": {"regex": PHONE}}, 14)),
        ("choices", completion, ("Color:", {"structured_outputs": {"choice": COLORS}}, 15)),
        ("schema", completion, ("Fruit JSON:", {"structured_outputs": {"json": ITEM_SCHEMA}}, 16)),
        ("regex", completion, ("Phone:", {"vllm_xargs": request_args(regex=PHONE)}, 17)),
        (None, completion, ("Write a haiku about bread.", {}, 18)),
    ]  # fmt: skip
    with ThreadPoolExecutor(len(jobs)) as pool:
        futures = [pool.submit(fn, *args) for _, fn, args in jobs]
        results = [f.result() for f in futures]
    for (name, _, args), (status, body) in zip(jobs, results, strict=True):
        assert status == 200, (args, body)
        choice = body["choices"][0]
        text = choice["message"]["content"] if "message" in choice else choice["text"]
        if name is None:
            assert text, args
            continue
        if name == "object":  # an open object may run past max_tokens: then a prefix of one
            if choice["finish_reason"] == "stop":
                assert isinstance(json.loads(text), dict), text
            else:
                assert text.startswith("{"), text
            continue
        assert choice["finish_reason"] == "stop", (name, text)
        check(name, text)


def test_responses_api_text_format(server: str) -> None:
    fmt = {"type": "json_schema", "name": "item", "schema": ITEM_SCHEMA, "strict": True}
    body = {
        "model": "smollm2",
        "input": "What fruit is in the basket? Answer in JSON.",
        "max_output_tokens": 48,
        "temperature": 0.0,
        "text": {"format": fmt},
    }
    status, out = post(server, "/v1/responses", body)
    assert status == 200, out
    texts = [
        part["text"]
        for item in out["output"]
        if item.get("type") == "message"
        for part in item["content"]
        if part.get("type") == "output_text"
    ]
    assert len(texts) == 1, out
    jsonschema.validate(json.loads(texts[0]), ITEM_SCHEMA)
