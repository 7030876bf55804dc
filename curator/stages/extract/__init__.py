"""Stages that turn markup (HTML) into plain text."""
