"""Wire code shared by the service, the model server and ``sagemaker_tfs.client``:
protos, tensors, Predict messages, signature specs, the HTTP error."""
