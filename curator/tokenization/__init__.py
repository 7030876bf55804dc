"""Tokenizers: loading (tokenizers, SentencePiece, tiktoken), the exact tiktoken twin of
byte-level BPE, and training."""
