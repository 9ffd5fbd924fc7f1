"""``sagemaker-tfs transform``: SageMaker Batch Transform run locally (see ``main.py``).

Data flows one way: ``storage`` lists the input objects and opens them as streams ->
``records`` splits each stream into records -> ``batching`` packs records into request bodies
-> ``runner`` sends them through ``endpoint_client`` with bounded concurrency, takes the answers in
input order, passes each record and its answer through ``filters`` (InputFilter, JoinSource,
OutputFilter) and writes them to a ``storage`` sink, committed under ``<name>.out`` only when
the whole object succeeded; ``progress`` reports as it goes. ``job`` parses and validates the
command line once into a ``TransformJob``; ``local_stack`` runs the stack the job calls.
"""
