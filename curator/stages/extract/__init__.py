"""Stages that turn raw markup (HTML, LaTeX) in ``text`` into prose."""
