"""Request and answer bodies by media type: JSON, JSON lines and CSV (the ``text_`` family),
images, NumPy."""
