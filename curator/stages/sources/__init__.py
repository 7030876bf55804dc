"""Sources that fetch raw data: Common Crawl, WARC files, Wikipedia dumps, arXiv."""
