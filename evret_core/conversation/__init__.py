"""Conversations: the query forms a conversation's turns are retrieved with (the turn's message, the history
window, a rewrite given in the data, a rewriter's output), the rewriters, and the evaluation of every turn under
every form in one run."""
