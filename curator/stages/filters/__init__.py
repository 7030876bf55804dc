"""Document filters: a score or signal per document, then a threshold that decides."""
