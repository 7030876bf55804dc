"""Stages that turn raw markup (LaTeX, HTML) in ``text`` into prose."""
