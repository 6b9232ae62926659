"""Value types of retrieval and judging: a retrieved document and what a judge sees (file formats are in
:mod:`evret_core.io`)."""
