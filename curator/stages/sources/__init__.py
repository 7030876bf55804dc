"""Sources of raw web data (WARC files, crawls)."""
