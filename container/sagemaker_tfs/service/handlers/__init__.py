"""The handler runtime: the user's ``inference.py``, its ``Context``, one invocation, streamed
answers."""
