"""HTTP routes: the JSON API (``api_*``) and the HTML pages."""
