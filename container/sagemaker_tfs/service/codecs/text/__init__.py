"""The JSON, JSON lines and CSV readers behind ``codecs/text_codecs.py``, their one entry point."""
