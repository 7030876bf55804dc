"""``curate serve``: runs, their live progress and their documents, read from run folders."""
