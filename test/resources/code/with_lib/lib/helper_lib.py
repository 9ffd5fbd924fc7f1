"""A module found only because code/lib is on the import path."""

MARKER = "from code/lib"
