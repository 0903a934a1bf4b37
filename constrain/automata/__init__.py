"""Stage 3: byte-level automata built from the IR (DFAs for terminals, lexer, parser tables)."""
