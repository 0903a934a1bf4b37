"""The synthetic corpus of the shipped diffusion model: four tasks, each with its constraint.

Every record is a prompt (a task tag such as ``"sql:"``) and a text of that task's language:

==========  =====================================================  ===========================
task        text                                                   constraint
==========  =====================================================  ===========================
person      ``{"name": "Ada", "age": 36, "city": "Oslo"}``         :data:`PERSON_SCHEMA`
product     ``{"sku": "KT-204", "qty": 3, "tags": ["eco"]}``       :data:`PRODUCT_SCHEMA`
arith       ``(7+12)*3=57``                                        :data:`ARITH_GRAMMAR` (Lark)
sql         ``SELECT name, age FROM users WHERE age > 30;``        :data:`SQL_GRAMMAR` (Lark)
==========  =====================================================  ===========================

JSON texts are written by ``json.dumps`` (``", "`` and ``": "`` separators, the layout of
``generate()``'s JSON grammar), properties in schema order. :data:`ARITH_REGEX` is the regular
part of the arithmetic language (no parentheses), for regex constraints. :func:`make_corpus`
is deterministic for a seed; :func:`is_valid` judges a text with third-party validators
(``jsonschema``, ``lark``, ``re``), independently of constrain's automata.
"""

from __future__ import annotations

import functools
import json
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ARITH_GRAMMAR",
    "ARITH_REGEX",
    "MAX_TEXT_BYTES",
    "PERSON_SCHEMA",
    "PRODUCT_SCHEMA",
    "SQL_GRAMMAR",
    "TASKS",
    "Record",
    "Task",
    "is_valid",
    "make_corpus",
]

MAX_TEXT_BYTES = 56
"""Longest text of the corpus (the model holds 64 positions: prompt, text, EOS padding)."""

NAMES = ("Ada", "Alan", "Grace", "Linus", "Edsger", "Barbara", "Ken", "Donald", "Margaret")
CITIES = ("Oslo", "Paris", "Lima", "Kyoto", "Cairo", "Austin")
TAGS = ("new", "sale", "eco", "gift")
TABLES = {
    "users": ("id", "name", "age", "city"),
    "orders": ("id", "qty", "price", "city"),
}
WORDS = ("oslo", "paris", "ada", "lima", "kyoto")
OPS = ("=", "<", ">", "<=", ">=", "!=")

PERSON_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "pattern": "^[A-Z][a-z]{1,9}$"},
        "age": {"type": "integer", "minimum": 18, "maximum": 90},
        "city": {"enum": list(CITIES)},
    },
    "required": ["name", "age", "city"],
    "additionalProperties": False,
}
PRODUCT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "sku": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{3}$"},
        "qty": {"type": "integer", "minimum": 1, "maximum": 99},
        "tags": {"type": "array", "items": {"enum": list(TAGS)}, "maxItems": 3},
    },
    "required": ["sku", "qty", "tags"],
    "additionalProperties": False,
}
ARITH_GRAMMAR = r"""start: expr "=" RESULT
?expr: term
     | expr "+" term
     | expr "-" term
?term: atom
     | term "*" atom
?atom: NUMBER
     | "(" expr ")"
NUMBER: /[0-9]{1,2}/
RESULT: /-?[0-9]{1,6}/
"""
ARITH_REGEX = r"[0-9]{1,2}([-+*][0-9]{1,2})*=-?[0-9]{1,6}"
SQL_GRAMMAR = r"""start: "SELECT " columns " FROM " TABLE where? order? limit? ";"
columns: "*" | COLUMN (", " COLUMN)*
where: " WHERE " condition (" AND " condition)*
condition: COLUMN " " OP " " value
value: NUMBER | STRING
order: " ORDER BY " COLUMN " DESC"?
limit: " LIMIT " NUMBER
TABLE: "users" | "orders"
COLUMN: "id" | "name" | "age" | "city" | "qty" | "price"
OP: "=" | "<" | ">" | "<=" | ">=" | "!="
NUMBER: /[0-9]{1,3}/
STRING: /'[a-z]{1,8}'/
"""


@dataclass(frozen=True)
class Task:
    """One task of the corpus: its prompt and its constraint, as ``generate()`` keywords."""

    name: str
    prompt: str
    constraint: dict[str, Any]
    """``{"schema": ...}``, ``{"grammar": ...}`` or ``{"regex": ...}``."""


@dataclass(frozen=True)
class Record:
    """One training example."""

    task: str
    prompt: str
    text: str


TASKS: dict[str, Task] = {
    "person": Task("person", "person:", {"schema": PERSON_SCHEMA}),
    "product": Task("product", "product:", {"schema": PRODUCT_SCHEMA}),
    "arith": Task("arith", "arith:", {"grammar": ARITH_GRAMMAR}),
    "sql": Task("sql", "sql:", {"grammar": SQL_GRAMMAR}),
}
"""The tasks, by name."""


def _person(rng: random.Random) -> str:
    value = {"name": rng.choice(NAMES), "age": rng.randint(18, 90), "city": rng.choice(CITIES)}
    return json.dumps(value)


def _product(rng: random.Random) -> str:
    sku = "".join(rng.choice("ABCDEKMPTX") for _ in range(2)) + f"-{rng.randint(0, 999):03d}"
    tags = rng.sample(TAGS, rng.randint(0, 3))
    return json.dumps({"sku": sku, "qty": rng.randint(1, 99), "tags": tags})


def _expr(rng: random.Random, depth: int, top: bool = False) -> str:
    if depth == 0 or (not top and rng.random() < 0.3):
        return str(rng.randint(0, 20))
    left, right = _expr(rng, depth - 1), _expr(rng, depth - 1)
    op = rng.choice("+-*")
    text = f"{left}{op}{right}"
    return f"({text})" if depth < 2 and rng.random() < 0.5 else text


def _arith(rng: random.Random) -> str:
    while True:
        text = _expr(rng, 3, top=True)  # at least one operator
        value = eval(text)  # noqa: S307 - our own digits and operators only
        if abs(value) < 10**6:
            return f"{text}={value}"


def _sql(rng: random.Random) -> str:
    table = rng.choice(list(TABLES))
    cols = TABLES[table]
    picked = "*" if rng.random() < 0.2 else ", ".join(rng.sample(cols, rng.randint(1, 2)))
    text = f"SELECT {picked} FROM {table}"
    if rng.random() < 0.7:
        conds = []
        for _ in range(rng.randint(1, 2)):
            col = rng.choice(cols)
            value = f"'{rng.choice(WORDS)}'" if col in ("name", "city") else rng.randint(0, 200)
            conds.append(f"{col} {rng.choice(OPS)} {value}")
        text += " WHERE " + " AND ".join(conds)
    if rng.random() < 0.3:
        text += f" ORDER BY {rng.choice(cols)}" + (" DESC" if rng.random() < 0.5 else "")
    if rng.random() < 0.2:
        text += f" LIMIT {rng.randint(1, 50)}"
    return text + ";"


_MAKERS: dict[str, Callable[[random.Random], str]] = {
    "person": _person,
    "product": _product,
    "arith": _arith,
    "sql": _sql,
}


def make_corpus(size: int, seed: int = 0, tasks: tuple[str, ...] = tuple(TASKS)) -> list[Record]:
    """Return ``size`` records, the tasks in turn, each text at most :data:`MAX_TEXT_BYTES`.

    Parameters
    ----------
    size : int
        Number of records.
    seed : int, optional
        The same seed gives the same corpus.
    tasks : tuple of str, optional
        Task names (default: all of :data:`TASKS`).

    Returns
    -------
    list of Record
    """
    rng = random.Random(seed)
    out = []
    for i in range(size):
        task = TASKS[tasks[i % len(tasks)]]
        text = _MAKERS[task.name](rng)
        while len(text.encode()) > MAX_TEXT_BYTES:
            text = _MAKERS[task.name](rng)
        out.append(Record(task.name, task.prompt, text))
    return out


@functools.lru_cache(maxsize=4)
def _lark_parser(grammar: str) -> Any:
    import lark

    return lark.Lark(grammar)


def is_valid(task: str, text: str, constraint: dict[str, Any] | None = None) -> bool:
    """Whether ``text`` satisfies a task's constraint (``jsonschema``, ``lark`` or ``re``).

    Parameters
    ----------
    task : str
        A name of :data:`TASKS`.
    text : str
        The output.
    constraint : dict, optional
        Another constraint to judge by (default: the task's).
    """
    import jsonschema
    import lark

    spec = constraint if constraint is not None else TASKS[task].constraint
    try:
        if "schema" in spec:
            jsonschema.validate(json.loads(text), spec["schema"])
        elif "grammar" in spec:
            _lark_parser(spec["grammar"]).parse(text)
        else:
            return re.fullmatch(spec["regex"], text) is not None
    except (ValueError, lark.exceptions.LarkError, jsonschema.ValidationError):
        return False
    return True
