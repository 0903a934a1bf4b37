"""Tool calls on the default model: 40 tool-use prompts, each with 1-5 tools.

Every prompt goes through ``constrain.generate(prompt, tools=..., tool_choice=...)`` on the
default model (SmolLM2-135M-Instruct, greedy with ``frequency_penalty`` 0.3 unless
``--frequency-penalty``, ``max_tokens`` 160, one call per answer unless ``--parallel``: the
small model repeats a call, or an array item, it may repeat), once with ``"required"`` and
once with ``"auto"``. The arguments' open arrays and strings are bounded through
``json_options={"max_items": 4, "max_length": 32}`` (``--max-items``, ``--max-length``; 0
leaves them open as the schemas say): unbounded, the model can loop inside an array until
``max_tokens``. The tools' schemas use enums, nested objects, arrays and optional fields.
An output *parses* when its calls read back in the template's format (``smollm2``) and every
call validates against its tool's schema (pydantic or ``jsonschema``); the table counts the
outputs that parse, that ended by themselves, that hold calls (and whether the call names a
tool the prompt is about: *on topic*) and, for ``"auto"``, that are prose only. The results
file (``results/tool-calls.json``, overwritten) keeps every output.

    python benchmarks/tool_calls.py
    python benchmarks/tool_calls.py --limit 5 --out /tmp/tools.json
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from enum import Enum
from pathlib import Path
from typing import Any, Literal

from common import args_record, log, machine, result_path, write_result
from pydantic import BaseModel, Field


class Unit(str, Enum):
    CELSIUS = "celsius"
    FAHRENHEIT = "fahrenheit"


def get_weather(city: str, unit: Unit = Unit.CELSIUS) -> str:
    """Get the current weather in a city."""
    return f"20 degrees {unit.value} in {city}"


def convert_currency(amount: float, source: str, target: str) -> float:
    """Convert an amount of money from one currency to another (ISO codes such as EUR)."""
    return amount


def search_web(query: str, max_results: int = 5) -> list[str]:
    """Search the web and return the titles of the results."""
    return []


class Attendee(BaseModel):
    name: str
    email: str | None = None


class CreateEvent(BaseModel):
    """Create a calendar event."""

    title: str
    date: str = Field(description="YYYY-MM-DD")
    attendees: list[Attendee] = []


class SendEmail(BaseModel):
    """Send an email."""

    to: list[str]
    subject: str
    body: str
    priority: Literal["low", "normal", "high"] = "normal"


class Address(BaseModel):
    street: str
    city: str
    country: str


class OrderItem(BaseModel):
    product: str
    quantity: int = Field(ge=1)


class PlaceOrder(BaseModel):
    """Order products for delivery."""

    items: list[OrderItem]
    address: Address
    express: bool = False


def set_timer(minutes: int, label: str | None = None) -> str:
    """Set a timer."""
    return "ok"


def translate(text: str, target_language: Literal["en", "fr", "de", "es", "it"]) -> str:
    """Translate a text into another language."""
    return text


def get_stock_price(ticker: str) -> float:
    """Get the latest price of a stock by its ticker symbol."""
    return 0.0


TOOLS: dict[str, Any] = {
    "get_weather": get_weather,
    "convert_currency": convert_currency,
    "search_web": search_web,
    "CreateEvent": CreateEvent,
    "SendEmail": SendEmail,
    "PlaceOrder": PlaceOrder,
    "set_timer": set_timer,
    "translate": translate,
    "get_stock_price": get_stock_price,
    "add": {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Add two numbers.",
            "parameters": {
                "type": "object",
                "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                "required": ["a", "b"],
            },
        },
    },
}

# (prompt, the tools offered, the tool the prompt is about or None for a chat-only prompt)
CASES: list[tuple[str, list[str], str | None]] = [
    ("What's the weather in Paris?", ["get_weather"], "get_weather"),
    (
        "Is it cold in Oslo today? Answer in fahrenheit.",
        ["get_weather", "search_web"],
        "get_weather",
    ),
    ("How much is 100 US dollars in euros?", ["convert_currency"], "convert_currency"),
    ("Convert 250 GBP to JPY.", ["convert_currency", "get_weather"], "convert_currency"),
    ("Find recent news about the Mars rover.", ["search_web"], "search_web"),
    ("Search for three pasta recipes.", ["search_web", "translate"], "search_web"),
    (
        "Schedule a meeting called Budget review on 2026-12-10 with Ana.",
        ["CreateEvent"],
        "CreateEvent",
    ),
    (
        "Create an event 'Team lunch' on 2026-12-18 for Bob and Carla.",
        ["CreateEvent", "SendEmail"],
        "CreateEvent",
    ),
    ("Email bob@example.com that the report is ready.", ["SendEmail"], "SendEmail"),
    (
        "Send an urgent email to ops@example.com: the server is down.",
        ["SendEmail", "search_web", "set_timer"],
        "SendEmail",
    ),
    ("Order two notebooks to 5 Main Street, Dublin, Ireland.", ["PlaceOrder"], "PlaceOrder"),
    (
        "I need 3 bags of coffee delivered express to 1 Rue Haute, Lyon, France.",
        ["PlaceOrder", "convert_currency"],
        "PlaceOrder",
    ),
    ("Set a timer for 10 minutes.", ["set_timer"], "set_timer"),
    ("Remind me in 25 minutes to check the oven.", ["set_timer", "SendEmail"], "set_timer"),
    ("Translate 'good morning' into French.", ["translate"], "translate"),
    ("How do you say 'thank you' in German?", ["translate", "search_web"], "translate"),
    ("What is Apple's stock price?", ["get_stock_price"], "get_stock_price"),
    (
        "How is the MSFT share doing?",
        ["get_stock_price", "search_web", "get_weather"],
        "get_stock_price",
    ),
    ("What is 17 plus 25?", ["add"], "add"),
    ("Add 3.5 and 4.25.", ["add", "convert_currency"], "add"),
    (
        "Weather in Rome, and convert 50 EUR to USD.",
        ["get_weather", "convert_currency"],
        "get_weather",
    ),
    (
        "Email the weather in Berlin to kim@example.com.",
        ["get_weather", "SendEmail", "search_web"],
        "get_weather",
    ),
    (
        "Find a hotel in Madrid and set a timer for 5 minutes.",
        ["search_web", "set_timer", "translate", "get_weather"],
        "search_web",
    ),
    (
        "Book a dentist appointment on 2027-01-04.",
        ["CreateEvent", "SendEmail", "set_timer", "search_web", "get_weather"],
        "CreateEvent",
    ),
    (
        "Buy five pencils, ship to 10 Oak Road, Leeds, UK.",
        ["PlaceOrder", "search_web", "convert_currency", "SendEmail", "add"],
        "PlaceOrder",
    ),
    ("Translate 'where is the station' to Spanish.", ["translate", "get_weather"], "translate"),
    (
        "What's the temperature in Tokyo in celsius?",
        ["get_weather", "get_stock_price"],
        "get_weather",
    ),
    ("Look up the population of Canada.", ["search_web", "add"], "search_web"),
    ("How many yen is 20 dollars?", ["convert_currency", "add", "translate"], "convert_currency"),
    ("Message alice@example.com and carl@example.com: dinner at 8.", ["SendEmail"], "SendEmail"),
    (
        "Add a calendar entry 'Flight to Rome' on 2027-02-14.",
        ["CreateEvent", "set_timer"],
        "CreateEvent",
    ),
    ("Tesla stock price please.", ["get_stock_price", "convert_currency"], "get_stock_price"),
    ("Put a 45 minute timer labelled laundry.", ["set_timer"], "set_timer"),
    ("Sum 1200 and 345.", ["add", "get_stock_price"], "add"),
    ("Say hello.", ["get_weather"], None),
    ("Tell me a short joke.", ["search_web", "set_timer"], None),
    ("What is the capital of Italy?", ["get_weather", "translate"], None),
    ("Thank you, that is all.", ["SendEmail"], None),
    ("Write one sentence about autumn.", ["translate", "search_web", "add"], None),
    ("Who are you?", ["get_stock_price", "get_weather", "CreateEvent"], None),
]


def run_case(
    prompt: str,
    names: Sequence[str],
    choice: str,
    model: Any,
    max_tokens: int,
    parallel: bool,
    frequency_penalty: float = 0.0,
    bounds: dict[str, int] | None = None,
) -> dict[str, Any]:
    import constrain

    tools = [TOOLS[n] for n in names]
    t0 = time.perf_counter()
    row: dict[str, Any] = {"prompt": prompt, "tools": list(names), "choice": choice}
    try:
        result = constrain.generate(
            prompt, tools=tools, tool_choice=choice, parallel_tool_calls=parallel, model=model,
            max_tokens=max_tokens, return_info=True, frequency_penalty=frequency_penalty,
            json_options=bounds or None,
        )  # fmt: skip
        turn = result.value
        row.update(
            text=turn.text,
            parsed=True,
            finish_reason=result.finish_reason,
            calls=[{"name": c.name, "arguments": _plain(c.arguments)} for c in turn.tool_calls],
            content=turn.content,
            error="",
        )
    except constrain.IncompleteOutputError as err:
        row.update(text=err.partial_texts[0], parsed=False, finish_reason="incomplete", calls=[])
        row.update(content="", error="cut by max_tokens")
    except constrain.OutputValidationError as err:  # a bug: the grammar let it through
        row.update(text=str(err), parsed=False, finish_reason="invalid", calls=[], content="")
        row.update(error=str(err))
    row["seconds"] = round(time.perf_counter() - t0, 2)
    return row


def _plain(arguments: Any) -> Any:
    return arguments.model_dump(mode="json") if hasattr(arguments, "model_dump") else arguments


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "outputs": len(rows),
        "parsed": sum(r["parsed"] for r in rows),
        "ended": sum(r["finish_reason"] == "stop" for r in rows),
        "with_calls": sum(bool(r["calls"]) for r in rows),
        "on_topic": sum(
            bool(r["calls"]) and r["calls"][0]["name"] == r.get("expected") for r in rows
        ),
        "prose_only": sum(r["parsed"] and not r["calls"] for r in rows),
        "rows": rows,
    }


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--limit", type=int, default=None, help="the first N prompts")
    p.add_argument("--max-tokens", type=int, default=160)
    p.add_argument("--choices", default="required,auto", help="comma list of tool_choice")
    p.add_argument(
        "--parallel", action="store_true", help="parallel_tool_calls=True (default: one call)"
    )
    p.add_argument(
        "--frequency-penalty",
        type=float,
        default=0.3,
        help="generate's frequency_penalty (default 0.3: the small model otherwise repeats an "
        "array item until max_tokens; 0 for plain greedy)",
    )
    p.add_argument(
        "--max-items",
        type=int,
        default=4,
        help="json_options max_items: the most items of an argument array with no maxItems "
        "(default 4; 0 leaves arrays open)",
    )
    p.add_argument(
        "--max-length",
        type=int,
        default=32,
        help="json_options max_length: the most characters of an argument string with no "
        "maxLength (default 32; 0 leaves strings open)",
    )
    p.add_argument("--out", type=Path, default=result_path("tool-calls"))
    args = p.parse_args(argv)
    bounds = {
        key: value
        for key, value in (("max_items", args.max_items), ("max_length", args.max_length))
        if value > 0
    }
    import constrain

    model = constrain.load_model()
    results: dict[str, Any] = {}
    for choice in args.choices.split(","):
        rows = []
        for prompt, names, expected in CASES[: args.limit]:
            row = run_case(
                prompt, names, choice, model, args.max_tokens, args.parallel,
                args.frequency_penalty, bounds,
            )  # fmt: skip
            row["expected"] = expected
            rows.append(row)
            log(f"  {choice:8s} {row['finish_reason']:10s} {row['text'][:90]!r}")
        results[choice] = summary(rows)
    print(f"{'tool_choice':12s}{'outputs':>8s}{'parsed':>8s}{'ended':>7s}{'calls':>7s}"
          f"{'on topic':>10s}{'prose':>7s}")  # fmt: skip
    for choice, r in results.items():
        print(
            f"{choice:12s}{r['outputs']:>8d}{r['parsed']:>8d}{r['ended']:>7d}"
            f"{r['with_calls']:>7d}{r['on_topic']:>10d}{r['prose_only']:>7d}"
        )
    payload = {"meta": machine(), "args": args_record(args), "results": results}
    log(f"wrote {write_result(args.out, payload)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
