"""Token-level DFA of a regular grammar (stage 7 helper for diffusion decoding).

DINGO (:func:`constrain.decoding.diffusion.dingo`) needs the transition function of the grammar
*per token*: ``delta(q, t)`` is the byte DFA's state after all the bytes of token ``t``, or
dead. :class:`TokenDfa` builds it from a compiled grammar whose language is regular:

- a regex grammar (one terminal) reuses the compiled lexer DFA as is;
- any other grammar (a JSON Schema, a Lark grammar without self-embedding) is first turned into
  one regex by :func:`grammar_regex` (rules inlined, right- or left-linear recursion solved with
  Arden's lemma, ``%ignore`` runs placed before every lexeme and at the end), then compiled to a
  minimal byte DFA;
- a grammar that is genuinely context-free raises :class:`NotRegularError`.

Rows are computed lazily, one state at a time, by a walk of the vocabulary's flat token trie that
skips dead subtrees, and kept as flat CSR arrays of live transitions (a state inside a number has
a few dozen, not ``V``); :meth:`TokenDfa.dense` builds the whole ``[S, V]`` table when it fits.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np

from constrain._types import BoolArray, Int32Array
from constrain.automata.dfa import Dfa, build_dfa
from constrain.compiler import CompiledGrammar
from constrain.errors import CompileLimitError, GrammarError, NotRegularError
from constrain.ir import EMPTY, Alt, Concat, Grammar, Regex, Repeat
from constrain.kernels.numba_diffusion import token_row_kernel
from constrain.vocab.vocabulary import Vocabulary

__all__ = ["NotRegularError", "TokenDfa", "grammar_regex"]


# --------------------------------------------------------------------------------------------
# Grammar -> one regex
# --------------------------------------------------------------------------------------------


def _alt(items: Sequence[Regex]) -> Regex:
    unique = tuple(dict.fromkeys(items))
    return unique[0] if len(unique) == 1 else Alt(unique)


def _cat(items: Sequence[Regex]) -> Regex:
    kept = tuple(i for i in items if i != EMPTY)
    return kept[0] if len(kept) == 1 else Concat(kept)


def _sccs(rules: dict[str, tuple[tuple[str, ...], ...]], start: str) -> list[list[str]]:
    """Strongly connected components of the rule graph, dependencies first (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    for root in [start, *rules]:
        if root in index:
            continue
        work = [(root, iter([s for alt in rules[root] for s in alt if s in rules]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter([s for a in rules[child] for s in a if s in rules])))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                comp: list[str] = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    comp.append(top)
                    if top == node:
                        break
                out.append(comp)
    return out


def _solve_component(
    comp: list[str],
    rules: dict[str, tuple[tuple[str, ...], ...]],
    symbol: dict[str, Regex],
) -> None:
    """Solve one recursive component as a linear system of regular equations (Arden's lemma).

    Each alternative of a rule of the component holds at most one component symbol, and it must
    be the last symbol of every such alternative (right-linear, ``X = a Y | b``) or the first of
    every one (left-linear, ``X = Y a | b``). Gauss-Jordan elimination with ``X = a X | b  =>
    X = a* b`` (right) or ``X = X a | b  =>  X = b a*`` (left) gives each rule's regex.
    """
    members = set(comp)
    right = left = True
    for name in comp:
        for alt in rules[name]:
            where = [k for k, s in enumerate(alt) if s in members]
            if len(where) > 1:
                raise NotRegularError(name)
            if where:
                right &= where[0] == len(alt) - 1
                left &= where[0] == 0
    if not (right or left):
        raise NotRegularError(comp[0])

    def join(outer: Regex, inner: Regex) -> Regex:
        return _cat((outer, inner) if right else (inner, outer))

    coef: dict[str, dict[str, list[Regex]]] = {}
    const: dict[str, list[Regex]] = {}
    for name in comp:
        coef[name], const[name] = {}, []
        for alt in rules[name]:
            var = next((s for s in alt if s in members), None)
            rest = _cat([symbol[s] for s in alt if s != var])
            if var is None:
                const[name].append(rest)
            else:
                coef[name].setdefault(var, []).append(rest)
    for k in comp:
        loop = coef[k].pop(k, None)
        if loop is not None:
            star = Repeat(_alt(loop), 0, None)
            coef[k] = {j: [join(star, _alt(c))] for j, c in coef[k].items()}
            const[k] = [join(star, _alt(const[k]))] if const[k] else []
        for i in comp:
            if i == k or k not in coef[i]:
                continue
            a_ik = _alt(coef[i].pop(k))
            for j, c in coef[k].items():
                coef[i].setdefault(j, []).append(join(a_ik, _alt(c)))
            if const[k]:
                const[i].append(join(a_ik, _alt(const[k])))
    for name in comp:
        symbol[name] = _alt(const[name]) if const[name] else Alt(())


def grammar_regex(grammar: Grammar) -> Regex:
    """Return one regex IR node with the language of a regular grammar.

    Parameters
    ----------
    grammar : Grammar
        Any grammar IR; it is normalised first.

    Returns
    -------
    Regex
        The language, with ``%ignore`` runs allowed before every lexeme and at the end.

    Raises
    ------
    NotRegularError
        If a rule's recursion is self-embedding (neither right- nor left-linear).
    """
    g = grammar.normalise()
    terms = g.terminal_map()
    rules = {r.name: r.alternatives for r in g.rules}
    ignore: Regex | None = None
    if g.ignore:
        ignore = Repeat(_alt([terms[n].regex for n in g.ignore]), 0, None)
    symbol: dict[str, Regex] = {
        name: (t.regex if ignore is None else Concat((ignore, t.regex)))
        for name, t in terms.items()
    }
    for comp in _sccs(rules, g.start):
        name = comp[0]
        if len(comp) == 1 and not any(name in alt for alt in rules[name]):
            symbol[name] = _alt([_cat([symbol[s] for s in alt]) for alt in rules[name]])
        else:
            _solve_component(comp, rules, symbol)
    body = symbol[g.start]
    return body if ignore is None else Concat((body, ignore))


# --------------------------------------------------------------------------------------------
# Token-level DFA
# --------------------------------------------------------------------------------------------


def _frozen(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


class TokenDfa:
    """The token-level transition function of a regular grammar for one vocabulary.

    Semantics as a loop (``row(q)[t]`` is ``delta(q, t)``; -1 is dead)::

        q = start
        for t in token_ids:
            q = row(q)[t]                 # the byte DFA after all bytes of token t
            if q < 0:
                break                     # no continuation of this text is in the language
        valid_prefix = q >= 0             # every state can still reach acceptance
        complete = q >= 0 and accepting[q]

    Special tokens (empty bytes) are dead, and so are padded ids past ``vocab.size``. With
    ``eos=True`` and a vocabulary with EOS ids, an EOS token leads from an accepting state to
    the extra state ``end_state``, where only EOS continues: trailing EOS padding, as diffusion
    LMs emit after the answer.

    Parameters
    ----------
    dfa : Dfa
        A byte DFA without dead states (state 0 initial).
    vocab : Vocabulary
        The vocabulary; rows have ``vocab.model_vocab_size`` entries.
    eos : bool, optional
        Give EOS ids the end-state transitions above (default True).

    Attributes
    ----------
    num_states : int
        ``S``: the byte DFA's states, plus ``end_state`` when EOS is used.
    start : int
        The initial state (0).
    end_state : int
        The state after EOS, or -1 without EOS.
    accepting : (S,) bool
        States where the text so far is a complete word (``end_state`` included).
    live : (S,) bool
        States from which acceptance is reachable (all of them but in the empty language).
    """

    def __init__(self, dfa: Dfa, vocab: Vocabulary, *, eos: bool = True) -> None:
        self.dfa = dfa
        self.vocab = vocab
        num = dfa.num_states
        self.eos_ids: Int32Array = vocab.eos_ids if eos else np.zeros(0, np.int32)
        self.end_state = num if self.eos_ids.size else -1
        self.num_states = num + (1 if self.eos_ids.size else 0)
        self.start = 0
        extra = [True] if self.eos_ids.size else []
        self.accepting: BoolArray = _frozen(np.append(dfa.accept, extra).astype(np.bool_))
        self.live: BoolArray = _frozen(np.append(dfa.live, extra).astype(np.bool_))
        self.width = vocab.model_vocab_size
        self._live_trans = np.ascontiguousarray(dfa.trans, dtype=np.int32)
        self._classes = np.ascontiguousarray(dfa.byte_class, dtype=np.uint8)
        self._slot = np.full(self.num_states, -1, dtype=np.int32)
        self._row_ptr = np.zeros((self.num_states, 2), dtype=np.int64)
        self._succ_ptr = np.zeros((self.num_states, 2), dtype=np.int64)
        self._tokens = np.zeros(1024, dtype=np.int32)
        self._targets = np.zeros(1024, dtype=np.int32)
        self._succ = np.zeros(256, dtype=np.int32)
        self._nnz = self._num_succ = self._used = 0
        self._lock = threading.Lock()

    @classmethod
    def from_compiled(cls, compiled: CompiledGrammar, *, eos: bool = True) -> TokenDfa:
        """Build the token-level DFA of a compiled grammar whose language is regular.

        Parameters
        ----------
        compiled : CompiledGrammar
            From ``Compiler(vocab).compile(grammar)``; its vocabulary is used.
        eos : bool, optional
            See :class:`TokenDfa`.

        Raises
        ------
        NotRegularError
            If the grammar is context-free but not regular.
        CompileLimitError
            If the byte DFA needs more than ``compiled.limits.max_lexer_states`` states.
        GrammarError
            If the grammar has token budgets or token-aligned terminals (a matcher counts
            tokens and places token boundaries, left to right).
        """
        if compiled.token_budgets or compiled.token_aligned:
            raise GrammarError(
                "the grammar bounds a region's tokens (max_tokens, Grammar.token_budgets) or ends "
                "a region at a token boundary (any_tokens, exclude_token, Grammar.token_aligned), "
                "which only a Matcher places: decode it autoregressively"
            )
        # A greedy grammar (%lexer basic) is read without greedy lexing here: its non-greedy
        # language, a superset (docs/diffusion.md).
        grammar, lexer = compiled.grammar, compiled.full_lexer()  # a lazy one built to the end
        if grammar.is_regular_terminal() and lexer.num_terminals == 1:
            dfa = Dfa(
                lexer.byte_class,
                lexer.trans,
                lexer.accept_bits[:, 0] != 0,
                lexer.alive_bits[:, 0] != 0,
            )
        else:
            limit = compiled.limits.max_lexer_states
            dfa = build_dfa(grammar_regex(grammar), max_states=limit, limit_name="max_lexer_states")
        return cls(dfa, compiled.vocab, eos=eos)

    # -- rows -----------------------------------------------------------------------------

    def _compute_row(self, state: int) -> tuple[Int32Array, Int32Array]:
        """Return the live transitions of ``state`` as ``(tokens, targets)``, sorted by token."""
        eos = self.eos_ids
        if state == self.end_state:
            return eos.copy(), np.full(eos.size, state, dtype=np.int32)
        vocab = self.vocab
        tokens = np.empty(vocab.size, dtype=np.int32)
        targets = np.empty(vocab.size, dtype=np.int32)
        count = token_row_kernel(
            self._live_trans, self._classes, self.live, vocab.node_byte, vocab.node_token,
            vocab.node_end, vocab.node_depth, vocab.token_next_dup, state, tokens, targets,
        )  # fmt: skip
        tokens, targets = tokens[:count], targets[:count]
        if self.end_state >= 0 and self.accepting[state]:
            tokens = np.concatenate([tokens, eos])
            targets = np.concatenate([targets, np.full(eos.size, self.end_state, np.int32)])
        order = np.argsort(tokens, kind="stable")
        return tokens[order], targets[order]

    @staticmethod
    def _append(buf: Int32Array, used: int, data: Int32Array) -> Int32Array:
        if used + data.size > buf.size:
            grown = np.zeros(max(2 * buf.size, used + data.size), dtype=np.int32)
            grown[:used] = buf[:used]
            buf = grown
        buf[used : used + data.size] = data
        return buf

    def csr(self, states: Int32Array) -> tuple[np.ndarray, ...]:
        """Return the transition rows of ``states`` in the flat layout the Viterbi kernel reads.

        Missing rows are built (a walk of the vocabulary's token trie that skips dead subtrees)
        and kept for later calls.

        Parameters
        ----------
        states : (R,) int32
            States in ``0 .. S - 1``.

        Returns
        -------
        row_ptr : (R, 2) int64
            ``[start, end)`` of each state's live transitions in ``tokens`` / ``targets``.
        tokens, targets : (N,) int32
            Token ids and target states (each row sorted by token id).
        succ_ptr : (R, 2) int64
            ``[start, end)`` of each state's distinct targets in ``succ``.
        succ : (K,) int32
            DINGO's mask move: the sorted distinct targets of each state.
        """
        with self._lock:
            for q in np.unique(states).tolist():
                if self._slot[q] >= 0:
                    continue
                tokens, targets = self._compute_row(q)
                succ = np.unique(targets).astype(np.int32)
                self._tokens = self._append(self._tokens, self._nnz, tokens)
                self._targets = self._append(self._targets, self._nnz, targets)
                self._succ = self._append(self._succ, self._num_succ, succ)
                self._row_ptr[q] = (self._nnz, self._nnz + tokens.size)
                self._succ_ptr[q] = (self._num_succ, self._num_succ + succ.size)
                self._nnz += tokens.size
                self._num_succ += succ.size
                self._slot[q] = self._used
                self._used += 1
            return (
                self._row_ptr[states],
                self._tokens,
                self._targets,
                self._succ_ptr[states],
                self._succ,
            )

    def transitions(self, state: int) -> tuple[Int32Array, Int32Array]:
        """Return ``(tokens, targets)``: the live transitions of ``state``, sorted by token."""
        row_ptr, tokens, targets, _, _ = self.csr(np.array([state], dtype=np.int32))
        lo, hi = int(row_ptr[0, 0]), int(row_ptr[0, 1])
        return tokens[lo:hi].copy(), targets[lo:hi].copy()

    def row(self, state: int) -> Int32Array:
        """Return ``delta(state, t)`` for every token ``t``: ``(V,) int32``, -1 = dead."""
        out = np.full(self.width, -1, dtype=np.int32)
        tokens, targets = self.transitions(state)
        out[tokens] = targets
        return out

    def mask_successors(self, state: int) -> Int32Array:
        """Return DINGO's ``delta(state, MASK)``: the sorted states one real token reaches."""
        out: Int32Array = np.unique(self.transitions(state)[1]).astype(np.int32)
        return out

    def dense(self, *, max_bytes: int = 256 * 2**20) -> Int32Array:
        """Return the full transition table ``(S, V) int32`` (-1 = dead).

        Raises
        ------
        CompileLimitError
            If the table would take more than ``max_bytes`` bytes.
        """
        size = self.num_states * self.width * 4
        if size > max_bytes:
            raise CompileLimitError(
                "max_dense_bytes", max_bytes, size, "use TokenDfa.row / csr (lazy) instead"
            )
        return np.stack([self.row(q) for q in range(self.num_states)])

    # -- single steps -----------------------------------------------------------------------

    def step(self, state: int, token_id: int) -> int:
        """Return ``delta(state, token_id)`` (-1 = dead, also from ``state < 0``)."""
        if state < 0 or not 0 <= token_id < self.width:
            return -1
        if token_id >= self.vocab.size or self.vocab.token_lengths[token_id] == 0:
            is_eos = bool((self.eos_ids == token_id).any())
            return self.end_state if is_eos and bool(self.accepting[state]) else -1
        if state == self.end_state:
            return -1
        nxt = self.dfa.walk(state, self.vocab.token_bytes_of(token_id))
        return nxt if nxt >= 0 and bool(self.live[nxt]) else -1

    def walk(self, token_ids: Sequence[int], state: int = 0) -> int:
        """Return the state after ``token_ids`` from ``state`` (-1 as soon as one is dead)."""
        for tok in token_ids:
            state = self.step(state, int(tok))
            if state < 0:
                return -1
        return state

    def __repr__(self) -> str:
        return (
            f"TokenDfa(states={self.num_states}, vocab_size={self.width}, rows_built={self._used}, "
            f"transitions={self._nnz})"
        )
