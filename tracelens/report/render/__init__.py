"""Renderers of a report dict: text (rich), Markdown, JSON, HTML."""
