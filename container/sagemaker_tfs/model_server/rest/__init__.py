"""The REST API: TF Serving's ``/v1/models/...`` over HTTP/1.1, its JSON read and written."""
