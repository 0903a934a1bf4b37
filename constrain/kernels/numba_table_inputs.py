"""Token-table kernels around a walk: its inputs, and the checks that spare one.

``entry_inputs_kernel`` derives a build's inputs from an Earley kernel (the expected terminals,
per terminal the next expected set and whether it is exact, and a signature under which equal
builds share an entry); ``bit_lists_kernel`` lists the lexer's accept bits for the walk. The
shortcuts: ``body_reach_kernel``, ``body_bound_kernel`` and ``all_alive_kernel`` (whether a
string-body slice of the vocabulary is allowed whole), ``equivalent_within`` (whether two lexer
states allow the same short tokens, so one's table can be reused). The walk itself is in
:mod:`constrain.kernels.numba_tables`.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = [
    "all_alive_kernel",
    "bit_lists_kernel",
    "body_bound_kernel",
    "body_reach_kernel",
    "entry_inputs_kernel",
    "equivalent_within",
]


@njit(cache=True, nogil=True)
def body_reach_kernel(
    trans: np.ndarray,
    built: np.ndarray,
    classes: np.ndarray,
    pos_ptr: np.ndarray,
    seq_ptr: np.ndarray,
    start: int,
    max_chars: int,
    out: np.ndarray,
    visited: np.ndarray,
    mark: np.ndarray,
    cur: np.ndarray,
    nxt: np.ndarray,
    stamp: np.ndarray,
) -> int:
    """Breadth-first search of the lexer states string-body characters lead ``start`` to.

    Each character shape ``q`` is the positions ``seq_ptr[q]:seq_ptr[q+1]``; position ``p``
    reads the byte classes ``classes[pos_ptr[p]:pos_ptr[p+1]]``. Only strings of at most
    ``max_chars`` characters are followed. Writes the states reached (``start`` first, then by
    increasing distance) to ``out`` and returns their number; -1 when some character kills the
    lexeme within ``max_chars`` characters (``out[0]`` then holds how many characters came
    before it), -2 when more than ``out.shape[0]`` states are reached.

    ``visited``, ``mark`` (int64, one per lexer state) are stamp arrays and ``cur``, ``nxt``
    (int64, one per state) scratch, reused across calls without clearing: ``stamp[0]`` is
    advanced past every stamp a call writes (it must never go back).

    Only the states of tokens count, as for :func:`body_bound_kernel`: a lazy lexer's states
    whose rows are not ``built`` (an empty ``built``: every row is) are on no token's path from
    ``start`` and are left out, with where they lead, instead of read as kills.
    """
    no_accepts = np.zeros((0, 1), np.uint64)  # acceptance not asked
    base = stamp[0] + 1
    visit = base
    tick = base
    visited[start] = visit
    out[0] = start
    n = 1
    head = 0
    level_end = 1  # out[:level_end] are at distance <= level
    level = 0
    while head < n:
        if head == level_end:
            level += 1
            level_end = n
        if level >= max_chars:
            break
        x = out[head]
        head += 1
        for q in range(seq_ptr.shape[0] - 1):
            nc, tick, dead, _ = _char_targets(
                x, q, trans, classes, pos_ptr, seq_ptr, built, no_accepts, mark, cur, nxt, tick
            )
            if dead:
                stamp[0] = tick
                out[0] = level
                return -1
            for i in range(nc):
                y = cur[i]
                if visited[y] != visit:
                    visited[y] = visit
                    if n >= out.shape[0]:
                        stamp[0] = tick
                        return -2
                    out[n] = y
                    n += 1
    stamp[0] = tick
    return n


_BOUND_WIDTH = 64  # the most states at one distance that body_bound_kernel follows


@njit(cache=True, nogil=True)
def body_bound_kernel(
    trans: np.ndarray,
    built: np.ndarray,
    alive_bits: np.ndarray,
    accept_bits: np.ndarray,
    allowed: np.ndarray,
    classes: np.ndarray,
    pos_ptr: np.ndarray,
    seq_ptr: np.ndarray,
    start: int,
    max_chars: int,
    mark: np.ndarray,
    cur: np.ndarray,
    nxt: np.ndarray,
    stamp: np.ndarray,
) -> int:
    """Find how many more string-body characters ``start`` takes, where that is a bound.

    ``R[d]`` are the states exactly ``d`` string-body characters lead ``start`` to (``R[0]``
    is ``start``); a state is *open* when an ``allowed`` terminal is alive there. Returns ``r``
    when every character from every state of ``R[0 .. r-1]`` leads to an open state and none
    from a state of ``R[r]`` does (a ``maxLength`` reached), or ``max_chars + 1`` when every
    text of ``max_chars + 1`` characters does (no bound within ``max_chars``). No state met
    past ``start`` (inside a character too) may accept a terminal: a token of string-body
    characters then stays one lexeme, allowed whole when it has at most ``r`` characters and
    dead when it has more. -1 otherwise: some characters lead to open states where others do
    not, a state accepts, or more than ``_BOUND_WIDTH`` states are at one distance.

    Only the states of tokens count, that is what a lazy lexer has built (``built[s]``; an
    empty ``built``: every row is built): before a table walk from ``start`` it builds the row
    of every state a token read from there meets (``LazyLexer.ensure``), so a state not built
    is on no token's path, and what text leads there and on from it concerns no token.

    Characters are ``body_reach_kernel``'s shapes, and ``mark``, ``cur``, ``nxt``, ``stamp``
    its scratch (``mark`` a stamp array reused without clearing: ``stamp[0]`` is advanced past
    every stamp a call writes).
    """
    check = built.shape[0] > 0
    words = allowed.shape[0]
    level = np.empty(_BOUND_WIDTH, np.int64)
    after = np.empty(_BOUND_WIDTH, np.int64)
    tick = stamp[0]
    level[0] = start
    nl = 1
    d = 0
    while True:
        na = 0
        closed = False  # some character leads to a dead or closed state
        for i in range(nl):
            for q in range(seq_ptr.shape[0] - 1):
                nc, tick, dead, accepts = _char_targets(
                    level[i], q, trans, classes, pos_ptr, seq_ptr, built, accept_bits, mark, cur,
                    nxt, tick,
                )  # fmt: skip
                if accepts:  # a lexeme could end inside a token
                    stamp[0] = tick
                    return -1
                closed = closed or dead
                for j in range(nc):  # where this character shape leads
                    y = cur[j]
                    if check and (y >= built.shape[0] or not built[y]):
                        continue  # no token reaches it (see above)
                    is_open = False
                    for w in range(words):
                        if alive_bits[y, w] & allowed[w] != 0:
                            is_open = True
                            break
                    if not is_open:
                        closed = True
                    elif not _holds(after, na, y):  # R[d + 1]
                        if na == _BOUND_WIDTH:
                            stamp[0] = tick
                            return -1
                        after[na] = y
                        na += 1
        stamp[0] = tick
        if closed and na:
            return -1
        if na == 0:  # no character goes on from R[d]
            return d
        if d == max_chars:  # open for max_chars + 1 characters: no bound within max_chars
            return max_chars + 1
        for i in range(na):
            level[i] = after[i]
        nl = na
        d += 1


@njit(cache=True, nogil=True, inline="always")
def _char_targets(  # type: ignore[no-untyped-def]
    x, q, trans, classes, pos_ptr, seq_ptr, built, accept_bits, mark, cur, nxt, tick
):
    """Follow string-body character shape ``q`` from state ``x`` (the searches above).

    Its byte positions in turn, over sets of states (``mark`` stamps from ``tick + 1`` on):
    returns ``(n, tick, dead, accepts)`` with the targets in ``cur[:n]``, the last stamp,
    whether some byte sequence of the shape kills the lexeme, and whether a state met accepts
    a terminal (``accept_bits`` with no rows: not asked). States whose rows are not ``built``
    (where ``built`` is not empty) are left out, with where they lead, and so are states past
    ``trans`` (a lazy lexer's rows built after its arrays were taken, by another thread, and
    marked in its flags); without ``built`` such a state reads as a kill (``dead``).
    """
    check = built.shape[0] > 0
    accepts = False
    dead = False
    cur[0] = x
    nc = 1
    for p in range(seq_ptr[q], seq_ptr[q + 1]):
        tick += 1
        nn = 0
        for j in range(nc):
            s = cur[j]
            if check and (s >= built.shape[0] or not built[s]):
                continue
            for k in range(pos_ptr[p], pos_ptr[p + 1]):
                y = trans[s, classes[k]]
                if y < 0:
                    dead = True
                elif y >= trans.shape[0]:  # past the snapshot (a row built since it):
                    dead = dead or not check  # left out by a search over rows built, else
                    continue  # unknown, read as a kill (the reach search: no slice taken)
                elif mark[y] != tick:
                    mark[y] = tick
                    nxt[nn] = y
                    nn += 1
                    for w in range(accept_bits.shape[1] if accept_bits.shape[0] else 0):
                        if accept_bits[y, w] != 0:
                            accepts = True
        for j in range(nn):
            cur[j] = nxt[j]
        nc = nn
    return nc, tick, dead, accepts


@njit(cache=True, nogil=True, inline="always")
def _holds(a: np.ndarray, n: int, x: int) -> bool:
    for i in range(n):
        if a[i] == x:
            return True
    return False


@njit(cache=True, nogil=True)
def equivalent_within(
    s: int, r: int, trans: np.ndarray, alive: np.ndarray, depth: int, max_pairs: int
) -> bool:
    """Tell whether states ``s`` and ``r`` keep alive the same strings of ``depth`` bytes or fewer.

    ``alive[x]``: the walk may continue at ``x``; a negative transition is dead. A breadth-first
    search over state pairs, level by level up to ``depth``; False when some string tells them
    apart or when more than ``max_pairs`` pairs would have to be visited (an answer on the safe
    side: the caller then walks the trie as usual; so is a state past ``alive``, a lazy lexer's
    row built after the arrays were taken). When True, for the
    :func:`walk_single_kernel` walk every token of at most ``depth`` bytes is allowed from ``s``
    iff it is from ``r``.
    """
    if s == r:
        return True
    num_states = trans.shape[0]
    num_classes = trans.shape[1]
    seen = dict()
    cur_a = np.empty(max_pairs, dtype=np.int64)
    cur_b = np.empty(max_pairs, dtype=np.int64)
    nxt_a = np.empty(max_pairs, dtype=np.int64)
    nxt_b = np.empty(max_pairs, dtype=np.int64)
    cur_a[0] = s
    cur_b[0] = r
    n = 1
    seen[s * num_states + r] = True
    for _ in range(depth):
        m = 0
        for k in range(n):
            a = cur_a[k]
            b = cur_b[k]
            for c in range(num_classes):
                x = trans[a, c]
                y = trans[b, c]
                if x >= alive.shape[0] or y >= alive.shape[0]:
                    return False  # a row built after the arrays were taken: not judged
                ok_x = x >= 0 and alive[x]
                ok_y = y >= 0 and alive[y]
                if ok_x != ok_y:
                    return False
                if not ok_x or x == y:
                    continue
                key = x * num_states + y
                if key in seen:
                    continue
                if len(seen) >= max_pairs:
                    return False
                seen[key] = True
                nxt_a[m] = x
                nxt_b[m] = y
                m += 1
        if m == 0:
            return True
        for k in range(m):
            cur_a[k] = nxt_a[k]
            cur_b[k] = nxt_b[k]
        n = m
    return True


@njit(cache=True, nogil=True)
def entry_inputs_kernel(  # type: ignore[no-untyped-def]
    item_next_t, item_rest_first, item_rest_nullable, kernel, expected, next_bits, next_exact,
    seen, sig,
):  # fmt: skip
    """Compute what a table build reads of an Earley kernel, and a signature of it.

    Semantics as a loop (the outputs and ``seen`` are reset first, so callers may reuse
    them)::

        expected[:] = 0; next_bits[:] = 0; next_exact[:] = True
        for item in kernel:
            t = item_next_t[item]
            expected |= bit(t);  next_bits[t] |= item_rest_first[item]
            if item_rest_nullable[item]: next_exact[t] = False
        sig = expected words, then for each expected t in increasing order:
              t, next_bits[t] words, next_exact[t]            (as uint64)

    Two kernels with equal signatures give the same table entry (the build reads only these
    rows). Returns the signature's length.

    Parameters
    ----------
    item_next_t : (I,) int32
    item_rest_first : (I, W) uint64
    item_rest_nullable : (I,) bool
    kernel : (k,) int32
        Earley items with a terminal after the dot.
    expected : (W,) uint64
        Written: the expected terminals.
    next_bits : (T, W) uint64
        Written: per terminal, the terminals that may follow it in these items.
    next_exact : (T,) bool
        Written: false where some item's rest after the terminal is nullable.
    seen : (T,) bool
        Scratch.
    sig : (W + T * (W + 2),) uint64
        Written: the signature.
    """
    num_words = expected.shape[0]
    for w in range(num_words):
        expected[w] = 0
    for t in range(next_exact.shape[0]):
        next_exact[t] = True
        seen[t] = False
        for w in range(num_words):
            next_bits[t, w] = 0
    for i in range(kernel.shape[0]):
        item = kernel[i]
        t = item_next_t[item]
        expected[t >> 6] |= np.uint64(1) << np.uint64(t & 63)
        for w in range(num_words):
            next_bits[t, w] |= item_rest_first[item, w]
        if item_rest_nullable[item]:
            next_exact[t] = False
        seen[t] = True
    n = 0
    for w in range(num_words):
        sig[n] = expected[w]
        n += 1
    for t in range(seen.shape[0]):
        if seen[t]:
            sig[n] = np.uint64(t)
            n += 1
            for w in range(num_words):
                sig[n] = next_bits[t, w]
                n += 1
            sig[n] = np.uint64(1) if next_exact[t] else np.uint64(0)
            n += 1
    return n


@njit(cache=True, nogil=True)
def bit_lists_kernel(bits: np.ndarray, ptr: np.ndarray, out: np.ndarray) -> int:
    """List the set bits of each row of ``bits`` (S, W) uint64 as CSR, ascending.

    With an empty ``out`` only counts: ``ptr`` (S + 1,) int64 receives the offsets. Then, with
    ``out`` of ``ptr[S]`` entries, writes bit ``64 w + b`` of row ``q`` into ``out[ptr[q]:]``.
    Returns ``ptr[S]``.
    """
    one = np.uint64(1)
    fill = out.shape[0] > 0
    ptr[0] = 0
    for q in range(bits.shape[0]):
        n = ptr[q]
        for w in range(bits.shape[1]):
            a = bits[q, w]
            b = 0
            while a != 0:
                if a & one:
                    if fill:
                        out[n] = 64 * w + b
                    n += 1
                a = a >> one
                b += 1
        ptr[q + 1] = n
    return int(ptr[bits.shape[0]])


@njit(cache=True, nogil=True)
def all_alive_kernel(alive_bits: np.ndarray, states: np.ndarray, allowed: np.ndarray) -> bool:
    """Return whether every state of ``states`` keeps some ``allowed`` terminal alive.

    ``np.all(np.any(alive_bits[states] & allowed, axis=1))`` without its temporaries (~20 us
    on every table miss inside a string).
    """
    for i in range(states.shape[0]):
        q = states[i]
        alive = False
        for w in range(allowed.shape[0]):
            if alive_bits[q, w] & allowed[w] != 0:
                alive = True
                break
        if not alive:
            return False
    return True
