"""Outputs of the shipped grammars on the default model, checked by each language's own parser.

For every shipped grammar, varied tasks go through ``constrain.generate(messages,
grammar=name, system=...)`` on the default model (greedy unless ``--temperature``,
``max_tokens`` 256), once per ``--frequency-penalties`` value (default: 0, then 0.3, generate's
``frequency_penalty``, which keeps a small model from repeating a row or an array item until
``max_tokens``), each asked as one asks a small chat model: a system message saying what
to write and two worked examples as earlier chat turns (``PROMPTS``; no example is a task).
Each output is checked:

- **sql**: sqlite (the standard library) runs ``EXPLAIN`` on it against a toy schema
  (``employees``, ``departments``, ``projects``): a *syntax* error fails the output, a missing
  table, column or function only marks it as not *sensible* (it parsed);
- **json**: ``json.loads``; **csv**: ``csv.reader`` (a header and rows of one width are
  reported as *sensible*); **arithmetic**: ``ast.parse`` after mapping ``^`` to ``**``.

It also records how each output ended: ``finish_reason`` ``"stop"`` (the model ended it) or
``"length"``, or ``"incomplete"`` when ``max_tokens`` cut it before the grammar accepted
(``IncompleteOutputError``), and the longest run of whitespace. The table prints the counts
per grammar and penalty; the results file (``results/grammar-outputs.json``, overwritten)
keeps every output.

    python benchmarks/grammar_outputs.py                 # 50 SQL tasks, 15 for each other
    python benchmarks/grammar_outputs.py --grammars sql --limit 5
    python benchmarks/grammar_outputs.py --grammars csv --temperature 0.7 --out /tmp/csv.json
"""

from __future__ import annotations

import argparse
import ast
import csv
import io
import json
import re
import sqlite3
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from common import args_record, log, machine, result_path, write_result

TOY_SCHEMA = """
CREATE TABLE departments (id INTEGER PRIMARY KEY, name TEXT, budget REAL, city TEXT);
CREATE TABLE employees (id INTEGER PRIMARY KEY, name TEXT, age INTEGER, salary REAL,
                        department_id INTEGER REFERENCES departments(id), hired TEXT);
CREATE TABLE projects (id INTEGER PRIMARY KEY, title TEXT, department_id INTEGER,
                       deadline TEXT, budget REAL);
"""
SCHEMA_HINT = (
    "Tables: employees(id, name, age, salary, department_id, hired), "
    "departments(id, name, budget, city), projects(id, title, department_id, deadline, budget)."
)
SQL_TASKS = [
    "all employees",
    "the names of all departments",
    "employees older than 30",
    "employees earning more than 50000",
    "the number of employees",
    "the average salary",
    "the highest salary",
    "employees sorted by salary, highest first",
    "the 5 youngest employees",
    "departments in Paris",
    "employees hired after 2020-01-01",
    "the total budget of all projects",
    "projects with a budget over 10000",
    "employee names with their department names",
    "the number of employees per department",
    "departments with more than 10 employees",
    "the average salary per department",
    "employees whose name starts with A",
    "projects due before 2025",
    "the names of employees in the Sales department",
    "distinct cities of departments",
    "employees without a department",
    "the oldest employee",
    "departments ordered by budget",
    "the 3 most expensive projects",
    "employees aged 25 to 35",
    "projects of the Research department",
    "the sum of salaries per department",
    "employees earning less than the average salary",
    "departments that have no projects",
    "employee count and average age",
    "the latest hire date",
    "names of all projects",
    "employees in departments with a budget above 100000",
    "the number of projects per department",
    "employees named Smith",
    "departments and their project counts",
    "employees hired in 2023",
    "the minimum project budget",
    "the top 10 salaries",
    "employees whose age is unknown",
    "projects whose title contains data",
    "cities with more than one department",
    "the second page of employees, 20 per page",
    "employees and their salaries in thousands",
    "departments sorted by name",
    "projects sorted by deadline",
    "the average project budget",
    "employees older than 60 or younger than 20",
    "the department with the largest budget",
]
OTHER_TASKS = {
    "json": [
        "a user profile",
        "a list of three colours",
        "a product with a price",
        "an empty object",
        "a book with title and author",
        "coordinates of Paris",
        "a shopping list",
        "a weather report",
        "a boolean flag named active",
        "a matrix of numbers",
        "an address",
        "a list of people with ages",
        "server settings",
        "a recipe",
        "the number 42",
    ],
    "arithmetic": [
        "two plus three",
        "the area of a circle of radius r",
        "a polynomial in x",
        "the average of a, b and c",
        "ten factorial written as a product",
        "x squared minus one",
        "the hypotenuse with sqrt",
        "compound interest",
        "a fraction of two sums",
        "the distance between two points",
        "speed from distance and time",
        "a percentage",
        "the quadratic formula's discriminant",
        "a power of two",
        "minus five times seven",
    ],
    "csv": [  # each says how many rows, as one asks for a small table
        "three fruits and their prices",
        "three students and their grades",
        "three cities and their countries",
        "three employees with names and roles",
        "a small inventory of three items",
        "temperatures on three dates",
        "three books and their authors",
        "three planets and their number of moons",
        "three products whose names hold quotes",
        "a phone book with three entries",
        "four countries and their capitals",
        "a two-column table of three numbers and their squares",
        "an order list of three items",
        "three colors with hex codes",
        "three animals and their number of legs",
    ],
}


# How each grammar is asked for: a system message and two worked examples (chat turns) before
# the task, as one prompts a small instruction-tuned model; no example is one of the tasks.
PROMPTS: dict[str, tuple[str, list[tuple[str, str]]]] = {
    "sql": (
        "You translate questions into SQLite queries. "
        + SCHEMA_HINT
        + " Reply with one SQL query ending in a semicolon, and nothing else.",
        [
            ("the names of employees older than 40", "SELECT name FROM employees WHERE age > 40;"),
            ("the number of projects", "SELECT COUNT(*) FROM projects;"),
        ],
    ),
    "json": (
        "You write JSON documents. Reply with one short JSON object and nothing else.",
        [
            ("a person", '{"name": "Ada Lovelace", "born": 1815}'),
            ("a list of two numbers", '{"numbers": [3, 7]}'),
        ],
    ),
    "arithmetic": (
        "You write arithmetic expressions. Reply with one expression and nothing else.",
        [("three times four plus one", "3 * 4 + 1"), ("the square of y minus two", "y^2 - 2")],
    ),
    "csv": (
        "You write small CSV files: a header line and three rows. Reply with the CSV only.",
        [
            (
                "three colours and their codes",
                "colour,code\nred,#ff0000\nblue,#0000ff\ngreen,#00ff00",
            ),
            (
                "three rivers and their lengths in km",
                "river,length_km\nNile,6650\nAmazon,6400\nYangtze,6300",
            ),
        ],
    ),
}


# The user's turn: an SQL task is a question; the others say what to write.
ASK = {
    "sql": "{task}",
    "json": "Write a JSON document for: {task}.",
    "arithmetic": "Write an arithmetic expression for: {task}.",
    "csv": "Write a CSV file for: {task}.",
}


def _prompt(name: str, task: str) -> list[dict[str, str]]:
    """The chat messages that ask for ``task`` (the system message is passed separately)."""
    messages: list[dict[str, str]] = []
    for question, answer in [*PROMPTS[name][1], (task, "")]:
        messages.append({"role": "user", "content": ASK[name].format(task=question)})
        if answer:
            messages.append({"role": "assistant", "content": answer})
    return messages


def check_sql(text: str) -> tuple[bool, bool, str]:
    db = sqlite3.connect(":memory:")
    db.executescript(TOY_SCHEMA)
    try:
        db.execute("EXPLAIN " + text.rstrip().rstrip(";"))
    except sqlite3.Error as err:
        message = str(err)
        syntax = "syntax error" in message or "incomplete input" in message
        return not syntax, False, message
    finally:
        db.close()
    return True, True, ""


def check_json(text: str) -> tuple[bool, bool, str]:
    try:
        json.loads(text)
    except ValueError as err:
        return False, False, str(err)
    return True, True, ""


def check_arithmetic(text: str) -> tuple[bool, bool, str]:
    # the grammar's whitespace (line breaks included) separates tokens, as a space does in
    # Python; its names may be Python keywords (``is``), so each gets a prefix
    python = re.sub(r"(?<![0-9.\w])[A-Za-z_]\w*", lambda m: "v_" + m[0], " ".join(text.split()))
    try:
        ast.parse(python.replace("^", "**"), mode="eval")
    except SyntaxError as err:
        return False, False, str(err)
    return True, True, ""


def check_csv(text: str) -> tuple[bool, bool, str]:
    try:
        rows = list(csv.reader(io.StringIO(text, newline="")))
    except csv.Error as err:
        return False, False, str(err)
    widths = {len(r) for r in rows if r}
    return True, len(rows) >= 2 and len(widths) == 1, ""


CHECKS: dict[str, Callable[[str], tuple[bool, bool, str]]] = {
    "sql": check_sql,
    "json": check_json,
    "arithmetic": check_arithmetic,
    "csv": check_csv,
}


def check(name: str, text: str, finish_reason: str) -> tuple[bool, bool, str]:
    """Check an output with its language's parser; a text cut before it was complete fails.

    (sqlite reads ``--`` as a comment, so a query cut after ``- -(...`` would parse there.)
    """
    if finish_reason == "incomplete":
        return False, False, "cut by max_tokens before the output was complete"
    return CHECKS[name](text)


def run(
    name: str,
    tasks: Sequence[str],
    model: Any,
    max_tokens: int,
    temperature: float,
    seed: int,
    frequency_penalty: float = 0.0,
) -> dict[str, Any]:
    import constrain

    rows = []
    for task in tasks:
        t0 = time.perf_counter()
        try:
            result = constrain.generate(
                _prompt(name, task), system=PROMPTS[name][0], grammar=name, model=model,
                max_tokens=max_tokens, temperature=temperature, seed=seed, return_info=True,
                frequency_penalty=frequency_penalty,
            )  # fmt: skip
            text, finish, tokens = result.text, result.finish_reason, result.output_tokens
        except constrain.IncompleteOutputError as err:  # cut by max_tokens, not complete
            text, finish, tokens = err.partial_texts[0], "incomplete", max_tokens
        parsed, sensible, error = check(name, text, finish)
        runs = [len(m) for m in re.findall(r"\s+", text)]
        rows.append(
            {
                "task": task,
                "text": text,
                "finish_reason": finish,
                "tokens": tokens,
                "parsed": parsed,
                "sensible": sensible,
                "error": error,
                "longest_whitespace": max(runs, default=0),
                "seconds": round(time.perf_counter() - t0, 2),
            }
        )
        log(f"  {name}: {finish:10s} parsed={parsed} {text[:80]!r}")
    return _summary(rows)


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The counts of a grammar's outputs, and the outputs."""
    return {
        "prompts": len(rows),
        "parsed": sum(r["parsed"] for r in rows),
        "sensible": sum(r["sensible"] for r in rows),
        "stopped": sum(r["finish_reason"] == "stop" for r in rows),
        "longest_whitespace": max((r["longest_whitespace"] for r in rows), default=0),
        "outputs": rows,
    }


def _print_table(runs: list[dict[str, Any]]) -> None:
    print(
        f"{'grammar':12s}{'penalty':>8s}{'prompts':>8s}{'parsed':>8s}{'ended':>8s}"
        f"{'sensible':>10s}{'max ws':>8s}"
    )
    for one in runs:
        for name, r in one["results"].items():
            print(
                f"{name:12s}{one['frequency_penalty']:>8g}{r['prompts']:>8d}{r['parsed']:>8d}"
                f"{r['stopped']:>8d}{r['sensible']:>10d}{r['longest_whitespace']:>8d}"
            )


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--grammars", default="sql,json,arithmetic,csv", help="comma list")
    p.add_argument("--limit", type=int, default=None, help="at most N prompts per grammar")
    p.add_argument("--max-tokens", type=int, default=256)
    p.add_argument("--temperature", type=float, default=0.0, help="0: greedy (default)")
    p.add_argument("--seed", type=int, default=1, help="for temperature > 0")
    p.add_argument(
        "--frequency-penalties",
        default="0,0.3",
        help="comma list: one run of every task per value of generate's frequency_penalty",
    )
    p.add_argument("--out", type=Path, default=result_path("grammar-outputs"))
    p.add_argument(
        "--recheck", action="store_true", help="re-run the checks on the outputs stored in --out"
    )
    args = p.parse_args(argv)
    if args.recheck:
        payload = json.loads(args.out.read_text(encoding="utf-8"))
        for one in payload["runs"]:
            for name, r in one["results"].items():
                for row in r["outputs"]:
                    checked = check(name, row["text"], row["finish_reason"])
                    row["parsed"], row["sensible"], row["error"] = checked
                one["results"][name] = _summary(r["outputs"])
        _print_table(payload["runs"])
        log(f"wrote {write_result(args.out, payload)}")
        return 0
    import constrain

    model = constrain.load_model()
    runs = []
    for penalty in [float(f) for f in args.frequency_penalties.split(",") if f]:
        results = {}
        for name in [g for g in args.grammars.split(",") if g]:
            tasks = SQL_TASKS if name == "sql" else OTHER_TASKS[name]
            log(f"[{name}, frequency_penalty {penalty:g}] {len(tasks[: args.limit])} prompts")
            results[name] = run(
                name, tasks[: args.limit], model, args.max_tokens, args.temperature, args.seed,
                penalty,
            )  # fmt: skip
        runs.append({"frequency_penalty": penalty, "results": results})
    _print_table(runs)
    payload = {"meta": machine(), "args": args_record(args), "runs": runs}
    log(f"wrote {write_result(args.out, payload)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
