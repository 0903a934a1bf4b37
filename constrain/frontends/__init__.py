"""Stage 1: front ends turning user input (regex, Lark, EBNF, JSON Schema, pydantic) into the IR."""
