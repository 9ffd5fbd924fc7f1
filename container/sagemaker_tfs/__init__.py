"""SageMaker TensorFlow Serving container, rebuilt in Python."""
