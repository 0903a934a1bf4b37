"""Stage 4: the tokenizer's vocabulary as bytes, with its token trie.

- :mod:`~constrain.vocab.vocabulary`: :class:`Vocabulary` (token bytes, special tokens, EOS,
  fingerprint, ``save``/``load``) and its on-disk cache;
- :mod:`~constrain.vocab.huggingface`: reading Hugging Face and tiktoken tokenizers;
- :mod:`~constrain.vocab.trie`: the flat token-trie arrays the mask kernels walk.
"""

from constrain.vocab.vocabulary import VOCAB_FORMAT_VERSION, Vocabulary, vocab_cache_dir

__all__ = ["VOCAB_FORMAT_VERSION", "Vocabulary", "vocab_cache_dir"]
