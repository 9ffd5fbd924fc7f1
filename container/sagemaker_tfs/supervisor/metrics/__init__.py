"""The stack's Prometheus metrics, gathered in the supervisor: the endpoint and its sources."""
