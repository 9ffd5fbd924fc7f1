"""The bidirectional stream's server and its connections."""
