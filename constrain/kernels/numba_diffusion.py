"""Numba kernels of stage 7 (diffusion decoding): token-level DFA rows and DINGO's Viterbi step.

The kernels work on flat numpy arrays and scalars only. Their wrappers are
:class:`constrain.decoding.token_dfa.TokenDfa` (rows) and
:func:`constrain.decoding.diffusion.dingo` (Viterbi), which fix the dtypes (``int32`` states and
tokens, ``int64`` offsets, ``float64`` scores) and preallocate the outputs. The naive oracles are
in ``tests/unit/test_diffusion.py``: byte-by-byte walks of every token, and a numpy max over a
dense transition table.
"""

from __future__ import annotations

import numpy as np
from numba import njit

MASK_TOKEN = -1


@njit(cache=True, nogil=True)
def viterbi_step_kernel(  # type: ignore[no-untyped-def]
    states, row_ptr, tokens, targets, succ_ptr, succ, scores, logp, mask_logp, out_score,
    out_state, out_token,
):  # fmt: skip
    """Relax every transition of one block position into the next position's scores.

    Semantics as a loop (the rows are CSR slices of ``tokens`` / ``targets``)::

        for a, q in enumerate(states):
            for k in range(row_ptr[a, 0], row_ptr[a, 1]):      # live transitions of q
                relax(targets[k], scores[a] + logp[tokens[k]], q, tokens[k])
            for k in range(succ_ptr[a, 0], succ_ptr[a, 1]):    # delta(q, MASK)
                relax(succ[k], scores[a] + mask_logp, q, MASK_TOKEN)

    where ``relax`` keeps the larger score (the first one on ties) and its back-pointers. The
    mask move reaches exactly the states one real token reaches (DINGO's substitution set).

    Parameters
    ----------
    states : (R,) int32
        Source states with a finite score.
    row_ptr : (R, 2) int64
        ``[start, end)`` of each source state's transitions in ``tokens`` / ``targets``.
    tokens, targets : (N,) int32
        Token ids and target states of the transitions.
    succ_ptr : (R, 2) int64
        ``[start, end)`` of each source state's distinct targets in ``succ``.
    succ : (K,) int32
        Distinct targets per state (the mask move).
    scores : (R,) float64
        Best log-probability of reaching each source state.
    logp : (V,) float64
        Log-probability of each token at this position (``-inf`` = never).
    mask_logp : float
        Log-probability of leaving the position masked (``-inf`` = not allowed).
    out_score : (S,) float64
        Output, ``-inf`` on entry: best score of each target state.
    out_state, out_token : (S,) int32
        Output back-pointers: the source state and the token (``MASK_TOKEN`` for a mask).
    """
    for a in range(states.shape[0]):
        q = states[a]
        base = scores[a]
        for k in range(row_ptr[a, 0], row_ptr[a, 1]):
            t = tokens[k]
            q2 = targets[k]
            value = base + logp[t]
            if value > out_score[q2]:
                out_score[q2] = value
                out_state[q2] = q
                out_token[q2] = t
        masked = base + mask_logp
        if masked == -np.inf:
            continue
        for k in range(succ_ptr[a, 0], succ_ptr[a, 1]):
            q2 = succ[k]
            if masked > out_score[q2]:
                out_score[q2] = masked
                out_state[q2] = q
                out_token[q2] = MASK_TOKEN


@njit(cache=True, nogil=True)
def token_row_kernel(  # type: ignore[no-untyped-def]
    trans, byte_class, live, node_byte, node_token, node_end, node_depth, next_dup, state,
    out_tokens, out_next,
):  # fmt: skip
    """Write the live token transitions of one byte-DFA state, walking the flat token trie.

    Semantics as a loop (dead subtrees of the trie are skipped, so the walk is usually far
    shorter than the vocabulary)::

        for t, data in enumerate(token_bytes):
            q = walk(trans, byte_class, state, data)
            if data and q >= 0 and live[q]:
                emit(t, q)

    Parameters
    ----------
    trans : (S, C) int32
        Byte-DFA transitions, -1 = dead.
    byte_class : (256,) uint8
        Class of each byte.
    live : (S,) bool
        States from which acceptance is reachable.
    node_byte, node_token, node_end, node_depth : (M,) arrays
        The vocabulary's flat DFS token trie (``constrain.Vocabulary``).
    next_dup : (V,) int32
        Next token id with the same bytes, or -1.
    state : int
        The source state.
    out_tokens, out_next : (V,) int32
        Outputs: token ids and their target states, in trie order.

    Returns
    -------
    int
        The number of transitions written.
    """
    depth_state = np.empty(node_depth.max() + 1, dtype=np.int32)
    depth_state[0] = state
    count = 0
    i = 1
    num_nodes = node_byte.shape[0]
    while i < num_nodes:
        nxt = trans[depth_state[node_depth[i] - 1], byte_class[node_byte[i]]]
        if nxt < 0:
            i = node_end[i]
            continue
        depth_state[node_depth[i]] = nxt
        tok = node_token[i]
        if live[nxt]:
            while tok >= 0:
                out_tokens[count] = tok
                out_next[count] = nxt
                count += 1
                tok = next_dup[tok]
        i += 1
    return count
