"""The supervisor process: configs from the environment, the child processes, the model registry."""
