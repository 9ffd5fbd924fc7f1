"""``sagemaker-tfs transform``: SageMaker Batch Transform run locally (see ``main.py``).

Data flows one way: ``storage`` lists the input objects and opens them as streams ->
``records`` splits each stream into records -> ``batching`` packs records into request bodies
-> ``runner`` sends them through ``invoker`` with bounded concurrency and hands the answers,
in input order, to ``assembly`` (data processing filters from ``filters``) which writes them
to a ``storage`` sink committed under ``<name>.out`` only when the whole object succeeded.
``job`` parses and validates the command line once into a ``TransformJob``.
"""
