"""The request edge: the falcon app, the request read once, errors, metrics, the body
budget, stateful sessions and gunicorn's hooks."""
