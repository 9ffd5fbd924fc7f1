"""The model server tier: its processes and config files, the standby and the zygote, and
the calls that ask about its models."""
