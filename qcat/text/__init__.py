"""Text before anything else reads it: the one normalizer and tokenizer every backend and training
share (``normalize.py``), and physical lines, their size limits and the longest query
(``lines.py``)."""
