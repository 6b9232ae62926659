"""The vocabulary as text, and which tokens a :class:`~evret_transformers.grammar.JsonGrammar` state allows.

:class:`TokenIndex` is built once per tokenizer from the token strings (``None`` for tokens that cannot be
used: special tokens, empty ones, and pieces of a multi-byte character that decode to U+FFFD): the usable token
strings sorted, which is a character trie without nodes (the tokens under a prefix are one slice, found by
bisection), and apart the tokens that are plain string content (no quote, backslash or control character), which
any free string position allows without running them through the grammar. :class:`TokenConstraint` answers, for
a state, the allowed token ids with the fewest tokens that complete the JSON after each, memoised per state: it
walks the trie in step with the grammar, one character at a time, and leaves a branch as soon as the grammar
refuses its prefix, so the work follows the allowed continuations, not the vocabulary. Pure Python.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence

from evret_transformers.grammar import JsonGrammar, State

UNSPELLABLE = 1 << 30


def _plain(text: str) -> bool:
    return all(ch not in '"\\' and ord(ch) >= 0x20 for ch in text)


class TokenIndex:
    """The usable token strings of a vocabulary (see the module), sorted (``sorted_strings``, with their ids in
    ``sorted_ids``). Flat lists: a vocabulary of 150,000 tokens costs a few megabytes."""

    def __init__(self, strings: Sequence[str | None]) -> None:
        self.strings = list(strings)
        self.special_ids: list[int] = []  # usable tokens that are not plain string content
        self.plain_ids: list[int] = []
        self.plain_lengths: list[int] = []
        self._spellings: dict[str, int] = {}
        for token_id, text in enumerate(self.strings):
            if not text or "\ufffd" in text:
                continue
            self._spellings.setdefault(text, token_id)
            if _plain(text):
                self.plain_ids.append(token_id)
                self.plain_lengths.append(len(text))
            else:
                self.special_ids.append(token_id)
        self._longest = max((len(t) for t in self._spellings), default=0)
        usable = sorted((text, token_id) for token_id, text in enumerate(self.strings)
                        if text and "\ufffd" not in text)
        self.sorted_strings = [text for text, _ in usable]
        self.sorted_ids = [token_id for _, token_id in usable]

    def spell(self, text: str, most: int) -> list[int]:
        """``text`` as tokens, the longest token that fits taken first, at most ``most`` of them (fewer when
        some of ``text`` cannot be spelled that way)."""
        out: list[int] = []
        start = 0
        while start < len(text) and len(out) < most:
            for end in range(min(len(text), start + self._longest), start, -1):
                token_id = self._spellings.get(text[start:end])
                if token_id is not None:
                    out.append(token_id)
                    start = end
                    break
            else:
                break
        return out

    def spell_cost(self, text: str) -> int:
        """The fewest tokens whose strings concatenate to ``text`` (a very large number when none do)."""
        best = [0] * (len(text) + 1)
        for start in range(len(text) - 1, -1, -1):
            best[start] = min((1 + best[end] for end in range(start + 1, min(len(text), start + self._longest) + 1)
                               if text[start:end] in self._spellings), default=UNSPELLABLE)
        return best[0]


class TokenConstraint:
    """Allowed tokens of a grammar over a vocabulary; ``allowed(state)`` is ``(ids, costs)``: the tokens that
    keep the text valid and, for each, the fewest tokens left to complete the JSON after it."""

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
        if self._free_string(state):
            stack = next(iter(state))
            rest = self.grammar.cost(frozenset([stack[:-1]]))
            _, low, high, _esc = stack[-1]
            for token_id, length in zip(self.index.plain_ids, self.index.plain_lengths, strict=True):
                if high is None or length <= high:
                    ids.append(token_id)
                    costs.append(rest + max(0, low - length) + 1)
            self._check(state, self.index.special_ids, ids, costs)
        else:
            strings = self.index.sorted_strings
            firsts = self.grammar.next_chars(state)
            if firsts is None:  # a string on one of the stacks: every first character is a branch to try
                self._walk(state, 0, len(strings), 0, ids, costs)
            else:  # only the branches of the characters the state can take: a few, whatever the vocabulary
                for ch in sorted(firsts):
                    low = bisect_left(strings, ch)
                    high = bisect_left(strings, chr(ord(ch) + 1), low) if ord(ch) < 0x10FFFF else len(strings)
                    if low < high:
                        self._branch(state, ch, low, high, 0, ids, costs)
        if len(self._memo) >= self._memo_size:
            self._memo.clear()
        self._memo[state] = (ids, costs)
        return ids, costs

    @staticmethod
    def _free_string(state: State) -> bool:
        """True when the one stack of ``state`` is inside a string, not in an escape: plain tokens all fit."""
        if len(state) != 1:
            return False
        stack = next(iter(state))
        return bool(stack) and stack[-1][0] == "S" and stack[-1][3] == 0

    def _walk(self, state: State, low: int, high: int, depth: int, ids: list[int], costs: list[int]) -> None:
        """Append the allowed tokens among ``sorted_strings[low:high]``, which share their first ``depth``
        characters, the grammar being in ``state`` after them; each next character is one branch of the trie."""
        strings = self.index.sorted_strings
        while low < high and len(strings[low]) == depth:  # the tokens that end here were taken by the caller
            low += 1
        while low < high:
            text = strings[low]
            ch = text[depth]
            # the branch: every string from `low` on that starts with text[:depth + 1] (sorted, so one slice)
            end = bisect_left(strings, text[:depth] + chr(ord(ch) + 1), low, high) if ord(ch) < 0x10FFFF else high
            self._branch(state, ch, low, end, depth, ids, costs)
            low = end

    def _branch(self, state: State, ch: str, low: int, end: int, depth: int, ids: list[int],
                costs: list[int]) -> None:
        """The allowed tokens of one trie branch: ``sorted_strings[low:end]``, whose character ``depth`` is ``ch``."""
        strings, grammar = self.index.sorted_strings, self.grammar
        after = grammar.advance(state, ch)
        if not after:
            return
        start, cost = low, -1
        while start < end and len(strings[start]) == depth + 1:  # the tokens that end with this character
            cost = grammar.cost(after) if cost < 0 else cost
            ids.append(self.index.sorted_ids[start])
            costs.append(cost)
            start += 1
        if start < end:
            self._walk(after, start, end, depth + 1, ids, costs)

    def _check(self, state: State, candidates: list[int], ids: list[int], costs: list[int]) -> None:
        grammar, strings = self.grammar, self.index.strings
        for token_id in candidates:
            after = grammar.advance(state, strings[token_id] or "")
            if after:
                ids.append(token_id)
                costs.append(grammar.cost(after))
