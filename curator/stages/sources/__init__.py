"""Source stages that read raw corpora (arXiv, Wikipedia, web archives) into documents."""
