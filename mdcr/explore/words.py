"""The words a query and a candidate share, marked in the candidate's text.

A word is a run of letters and digits, compared in lower case; stop words (Lucene's
English list, ``EnglishAnalyzer.ENGLISH_STOP_WORDS_SET``, the analyzer the project's BM25
uses) and one-character words are never marked. Words are matched as written, without
stemming, so what is marked is exactly what both texts say.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Lucene's EnglishAnalyzer.ENGLISH_STOP_WORDS_SET (33 words).
STOP_WORDS = frozenset(
    ("a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is",
     "it", "no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there",
     "these", "they", "this", "to", "was", "will", "with")
)  # fmt: skip
_WORD = re.compile(r"[^\W_]+", re.UNICODE)


@dataclass(frozen=True)
class Piece:
    """A piece of a text: ``shared`` when it is a word the query has too."""

    text: str
    shared: bool = False


def words(text: str) -> set[str]:
    """The words of ``text`` that may be marked (lower case, no stop word)."""
    return {w for w in (m.group(0).lower() for m in _WORD.finditer(text)) if _markable(w)}


def _markable(word: str) -> bool:
    return len(word) > 1 and word not in STOP_WORDS


def pieces(text: str, query_words: set[str]) -> list[Piece]:
    """``text`` cut into pieces, each word the query shares its own piece."""
    out: list[Piece] = []
    last = 0
    for m in _WORD.finditer(text):
        if m.group(0).lower() in query_words:
            if m.start() > last:
                out.append(Piece(text[last : m.start()]))
            out.append(Piece(m.group(0), True))
            last = m.end()
    if last < len(text):
        out.append(Piece(text[last:]))
    return out


def shared_in(*texts: list[Piece]) -> int:
    """How many distinct words the query shares with texts already cut into pieces: the
    size of ``words(text) & query_words`` for the texts joined by spaces, without cutting
    them again."""
    return len({p.text.lower() for cut in texts for p in cut if p.shared})
