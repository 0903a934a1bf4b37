"""Stage 1: front ends turning user input (regex, Lark, JSON Schema, pydantic) into the IR."""
