"""Which model server serves a request, the connections to it, and the predict routes taken
without ``inference.py``."""
