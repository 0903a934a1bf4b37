"""Numba kernels of the lazy lexer that choose which rows to build: neighbourhoods, token walks.

:func:`lazy_expand_kernel` builds the rows of every DFA state within some bytes of seed states
(breadth first), :func:`lazy_walk_kernel` the rows a walk of the token trie reads. Both build a
row with :func:`~constrain.kernels.numba_lazy.expand_row`, which keeps the lazy DFA's store
(:mod:`constrain.kernels.numba_lazy`). Their search loops are kernels of their own over plain
arrays (:func:`_bfs_span`, :func:`_walk_span`): with the calls that grow the store inside,
every step cost several times as much.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from constrain.kernels.numba_lazy import expand_row, make_room, new_work

__all__ = ["lazy_expand_kernel", "lazy_walk_kernel"]


@njit(cache=True, nogil=True)
def lazy_expand_kernel(  # type: ignore[no-untyped-def]
    nfa, reg, num_real, store, seeds, depth, max_states, stamp, call, radius, marks
):
    """Expand every DFA state within ``depth`` bytes of ``seeds`` (breadth first).

    Parameters
    ----------
    nfa, reg : tuples
        As for :func:`lazy_start_kernel`.
    num_real : int
        Number of real NFA states (virtual ids start there).
    store : tuple
        The lazy DFA (:func:`lazy_start_kernel`); its arrays grow and are returned.
    seeds : (K,) int32
        DFA states whose neighbourhood is needed.
    depth : int
        Radius in bytes (0: the seeds' own rows).
    max_states : int
        Stop with status 1 as soon as more DFA states would be needed.
    stamp : (S',) int64
        Visit stamps (grown and returned); ``call`` is this call's stamp (> every earlier one).
    radius : (S',) int64
        Per state, a radius within which every row is built (grown and returned): a state at
        distance ``d`` from a seed gets at least ``depth - d``.
    marks : tuple
        ``(mark, gen)``: the DFA's ``(num_real,)`` int64 closure marks and ``(1,)`` int64
        generation, kept between calls (zeros at first).

    Returns
    -------
    status : int
        0 on success, 1 when ``max_states`` was reached.
    store, stamp, radius : the grown arrays.
    """
    C = store[0].shape[1]
    work = new_work(marks[0], marks[1], C)
    stamp, radius = _room_for_states(stamp, radius, store[0].shape[0])
    queue = np.empty(max(64, 4 * C), np.int64)
    dist = np.empty(queue.shape[0], np.int64)
    head = 0
    tail = 0
    for i in range(seeds.shape[0]):
        s = seeds[i]
        if stamp[s] != call:
            if tail == queue.shape[0]:
                queue, dist = _grown_queue(queue, dist, tail)
            stamp[s] = call
            queue[tail] = s
            dist[tail] = 0
            tail += 1
    while True:
        head, tail, s = _bfs_span(store[0], store[1], queue, dist, stamp, call, head, tail, depth)
        if s == -1:
            break
        if s == -2:
            queue, dist = _grown_queue(queue, dist, tail)
            continue
        status = expand_row(s, nfa, reg, num_real, store, max_states, work)
        while status == 2:
            store, work = make_room(s, nfa, reg, num_real, store, work)
            status = expand_row(s, nfa, reg, num_real, store, max_states, work)
        if status != 0:
            return 1, store, stamp, radius
        stamp, radius = _room_for_states(stamp, radius, store[0].shape[0])
    # the radii only now that the whole neighbourhood is built (a limit stops it half way)
    for i in range(tail):
        s = queue[i]
        if depth - dist[i] > radius[s]:
            radius[s] = depth - dist[i]
    return 0, store, stamp, radius


@njit(cache=True, nogil=True)
def _bfs_span(trans, expanded, queue, dist, stamp, call, head, tail, depth):  # type: ignore[no-untyped-def]
    """Go on with the breadth-first search from queue position ``head``.

    Returns ``(head, tail, s)``: ``s`` is a state whose row must be built before the search
    can go on (its position is ``head``), -2 when the queue needs room, -1 when the search is
    over. Its own loop over plain arrays, as :func:`_walk_span`.
    """
    C = trans.shape[1]
    while head < tail:
        s = queue[head]
        if not expanded[s]:
            return head, tail, s
        d = dist[head]
        if d < depth:
            if tail + C > queue.shape[0]:
                return head, tail, -2
            prev = -1
            for c in range(C):
                t = trans[s, c]
                if t < 0 or t == prev or stamp[t] == call:
                    continue  # dead, the previous class's target, or seen in this call
                prev = t
                stamp[t] = call
                queue[tail] = t
                dist[tail] = d + 1
                tail += 1
        head += 1
    return head, tail, -1


@njit(cache=True, nogil=True)
def _grown_queue(queue, dist, used):  # type: ignore[no-untyped-def]
    """Return the queue and its distances with twice the room."""
    q = np.empty(2 * queue.shape[0], np.int64)
    d = np.empty(2 * queue.shape[0], np.int64)
    q[:used] = queue[:used]
    d[:used] = dist[:used]
    return q, d


@njit(cache=True, nogil=True)
def _room_for_states(stamp, radius, n):  # type: ignore[no-untyped-def]
    """Return the stamps and radii with room for ``n`` states (new radii -1)."""
    if stamp.shape[0] >= n:
        return stamp, radius
    grown = np.zeros(n, np.int64)
    grown[: stamp.shape[0]] = stamp
    grown_r = np.full(n, -1, np.int64)
    grown_r[: radius.shape[0]] = radius
    return grown, grown_r


@njit(cache=True, nogil=True)
def _walk_span(trans, expanded, node_byte, node_end, node_depth, byte_class, at, i):  # type: ignore[no-untyped-def]
    """Walk the trie from node ``i`` until a state whose row is not built; return both.

    ``at[d]`` is the state after the first ``d`` bytes of the current node's path. Returns the
    node to go on from and the state to expand first (-1: the walk is over). A loop of its own,
    without the calls that grow the store, so that it compiles to a tight loop (with the calls
    in it, every node cost ~10x as much).
    """
    n = node_byte.shape[0]
    while i < n:
        d = node_depth[i]
        t = trans[at[d - 1], byte_class[node_byte[i]]]
        if t < 0:
            i = node_end[i]
            continue
        at[d] = t
        i += 1
        if not expanded[t]:
            return i, t
    return i, -1


@njit(cache=True, nogil=True)
def lazy_walk_kernel(nfa, reg, num_real, store, seeds, trie, byte_class, max_states, marks):  # type: ignore[no-untyped-def]
    """Expand the rows a walk of the token trie from each of ``seeds`` reads.

    ``trie`` is ``(node_byte, node_end, node_depth)`` (the flat DFS trie of
    :mod:`constrain.vocab.trie`, or a single path); a subtree is skipped where the lexer dies.
    Where a lexeme ends inside a token the rest is read from the boundary state 0, whose rows
    the caller builds along every token suffix (``LazyLexer.prime``). ``marks`` as for
    :func:`lazy_expand_kernel`.

    Returns
    -------
    status : int
        0 on success, 1 when ``max_states`` was reached.
    store : the grown arrays.
    """
    node_byte, node_end, node_depth = trie
    C = store[0].shape[1]
    work = new_work(marks[0], marks[1], C)
    depth_max = 1
    for i in range(node_depth.shape[0]):
        if node_depth[i] + 1 > depth_max:
            depth_max = node_depth[i] + 1
    at = np.empty(depth_max + 1, np.int64)
    for j in range(seeds.shape[0]):
        t = seeds[j]
        i = 1
        at[0] = t
        while t >= 0:
            if not store[1][t]:  # where a token ends, its row says whether the lexeme goes on
                status = expand_row(t, nfa, reg, num_real, store, max_states, work)
                while status == 2:
                    store, work = make_room(t, nfa, reg, num_real, store, work)
                    status = expand_row(t, nfa, reg, num_real, store, max_states, work)
                if status != 0:
                    return 1, store
            i, t = _walk_span(
                store[0], store[1], node_byte, node_end, node_depth, byte_class, at, i
            )
    return 0, store
