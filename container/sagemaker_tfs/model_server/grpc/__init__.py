"""The gRPC API: TF Serving's PredictionService and ModelService, and their server."""
