"""Stage 4b: token-mask tables, computed lazily per (lexer state, Earley kernel).

- :mod:`~constrain.tables.mask_tables`: :class:`MaskTables` (the pooled entries, their index and
  immutable :class:`TableSnapshot` views, and the trie walks that build them);
- :mod:`~constrain.tables.token_classes`: the token classes of lexer states whose walks are dear
  (SQL at a lexeme boundary), which serve their later entries instead of walks;
- :mod:`~constrain.tables.set_stores`: the configuration-set stores both kinds of walk keep
  between walks.
"""

from constrain.tables.mask_tables import SLICE_CHARS, MaskTables, TableSnapshot

__all__ = ["SLICE_CHARS", "MaskTables", "TableSnapshot"]
