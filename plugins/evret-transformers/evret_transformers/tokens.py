"""The vocabulary as text, and which tokens a :class:`~evret_transformers.grammar.JsonGrammar` state allows.

:class:`TokenIndex` is built once per tokenizer from the token strings (``None`` for tokens that cannot be
used: special tokens, empty ones, and pieces of a multi-byte character that decode to U+FFFD): a trie of every
usable token, and apart the tokens that are plain string content (no quote, backslash or control character), which
any free string position allows without walking them. :class:`TokenConstraint` answers, for a state, the allowed
token ids with the fewest characters that complete the JSON after each, memoised per state. Pure Python.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evret_transformers.grammar import JsonGrammar, State

Trie = dict[str, Any]  # char -> [child trie, token ids ending here]
UNSPELLABLE = 1 << 30


def _plain(text: str) -> bool:
    return all(ch not in '"\\' and ord(ch) >= 0x20 for ch in text)


class TokenIndex:
    """The usable token strings of a vocabulary, as tries (see the module)."""

    def __init__(self, strings: Sequence[str | None]) -> None:
        self.strings = list(strings)
        self.trie: Trie = {}
        self.special_trie: Trie = {}  # tokens that are not plain string content
        self.plain_ids: list[int] = []
        self.plain_lengths: list[int] = []
        for token_id, text in enumerate(self.strings):
            if not text or "\ufffd" in text:
                continue
            _insert(self.trie, text, token_id)
            if _plain(text):
                self.plain_ids.append(token_id)
                self.plain_lengths.append(len(text))
            else:
                _insert(self.special_trie, text, token_id)

    def spell_cost(self, text: str) -> int:
        """The fewest tokens whose strings concatenate to ``text`` (a very large number when none do)."""
        best = [0] * (len(text) + 1)
        for start in range(len(text) - 1, -1, -1):
            best[start] = UNSPELLABLE
            node = self.trie
            for end in range(start, len(text)):
                entry = node.get(text[end])
                if entry is None:
                    break
                if entry[1]:
                    best[start] = min(best[start], 1 + best[end + 1])
                node = entry[0]
        return best[0]


def _insert(trie: Trie, text: str, token_id: int) -> None:
    node = trie
    for i, ch in enumerate(text):
        entry = node.get(ch)
        if entry is None:
            entry = node[ch] = [{}, []]
        if i == len(text) - 1:
            entry[1].append(token_id)
        node = entry[0]


class TokenConstraint:
    """Allowed tokens of a grammar over a vocabulary; ``allowed(state)`` is ``(ids, costs)``: the tokens that
    keep the text valid and, for each, the fewest characters left to complete the JSON after it."""

    def __init__(self, grammar: JsonGrammar, index: TokenIndex, memo: int = 4096) -> None:
        self.grammar = grammar
        self.index = index
        self._memo: dict[State, tuple[list[int], list[int]]] = {}
        self._memo_size = memo

    def allowed(self, state: State) -> tuple[list[int], list[int]]:
        hit = self._memo.get(state)
        if hit is not None:
            return hit
        ids: list[int] = []
        costs: list[int] = []
        bulk = self._free_string(state)
        if bulk is not None:
            stack = next(iter(state))
            rest = self.grammar.cost(frozenset([stack[:-1]]))
            _, low, high, _esc = stack[-1]
            for token_id, length in zip(self.index.plain_ids, self.index.plain_lengths, strict=True):
                if high is None or length <= high:
                    ids.append(token_id)
                    costs.append(rest + max(0, low - length) + 1)
            self._walk(self.index.special_trie, state, ids, costs)
        else:
            self._walk(self.index.trie, state, ids, costs)
        if len(self._memo) >= self._memo_size:
            self._memo.clear()
        self._memo[state] = (ids, costs)
        return ids, costs

    @staticmethod
    def _free_string(state: State) -> bool | None:
        """True when the one stack of ``state`` is inside a string, not in an escape: plain tokens all fit."""
        if len(state) != 1:
            return None
        stack = next(iter(state))
        return True if stack and stack[-1][0] == "S" and stack[-1][3] == 0 else None

    def _walk(self, trie: Trie, state: State, ids: list[int], costs: list[int]) -> None:
        grammar = self.grammar
        todo: list[tuple[Trie, State]] = [(trie, state)]
        while todo:
            node, current = todo.pop()
            for ch, (child, ending) in node.items():
                after = grammar.advance(current, ch)
                if not after:
                    continue
                if ending:
                    cost = grammar.cost(after)
                    ids.extend(ending)
                    costs.extend([cost] * len(ending))
                if child:
                    todo.append((child, after))
