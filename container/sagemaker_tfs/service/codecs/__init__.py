"""Request and answer bodies by media type: JSON, JSON lines and CSV (``text_codecs``, its
internals in ``text/``), images, NumPy."""
