"""Sources of raw corpora: web archives, Common Crawl, arXiv, Wikipedia."""
