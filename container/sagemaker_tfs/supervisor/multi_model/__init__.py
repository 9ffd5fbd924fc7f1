"""Multi-model endpoints: the registry, the memory checks, the control API, shared code from S3."""
