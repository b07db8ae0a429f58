"""A small Okapi BM25 index over tool metadata, for ``tool_search`` (pure).

Tokens are lower-cased words split on anything that is not a letter or digit and at
``camelCase`` boundaries (so ``mcp__docs__searchFiles`` is ``mcp docs search files``),
with English stop words and single letters dropped and a plural ``s`` stripped, the same way for
documents and queries. Scores use k1 = 1.2, b = 0.75 and the non-negative IDF
``ln(1 + (N - n + 0.5) / (n + 0.5))``; documents sharing no token with the query
are not returned, and ties keep the documents' order.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

__all__ = ["Bm25Index", "tokens"]

_K1 = 1.2
_B = 0.75
_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
_STOP = frozenset(
    "a an and are as at be by for from has have in is it its of on or that the this to was were will with "
    "you your".split()
)


def tokens(text: str) -> list[str]:
    words = []
    for raw in _WORD.findall(text):
        word = raw.lower()
        if word in _STOP or (len(word) == 1 and not word.isdigit()):
            continue
        if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]
        words.append(word)
    return words


class Bm25Index:
    """``search(query, limit)`` -> indices of ``documents``, best first."""

    def __init__(self, documents: Sequence[str]) -> None:
        self._docs = [Counter(tokens(d)) for d in documents]
        self._lengths = [sum(c.values()) for c in self._docs]
        self._average = (sum(self._lengths) / len(self._docs)) if self._docs else 0.0
        frequency: Counter[str] = Counter()
        for doc in self._docs:
            frequency.update(doc.keys())
        count = len(self._docs)
        self._idf = {t: math.log(1 + (count - n + 0.5) / (n + 0.5)) for t, n in frequency.items()}

    def search(self, query: str, limit: int) -> list[int]:
        terms = set(tokens(query))
        scored = []
        for index, doc in enumerate(self._docs):
            score = 0.0
            norm = _K1 * (1 - _B + _B * self._lengths[index] / self._average) if self._average else _K1
            for term in terms:
                tf = doc.get(term, 0)
                if tf:
                    score += self._idf[term] * tf * (_K1 + 1) / (tf + norm)
            if score > 0:
                scored.append((-score, index))
        scored.sort()
        return [index for _, index in scored[:limit]]
