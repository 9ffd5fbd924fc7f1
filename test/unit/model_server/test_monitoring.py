"""TF Serving's Prometheus names and layout, read back with prometheus_client's own parser."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families
from sagemaker_tfs.model_server.errors import Code, ServingError
from sagemaker_tfs.model_server.monitoring import LATENCY_BUCKETS, ServingMetrics, exported_name


def families(metrics: ServingMetrics) -> dict:
    text = metrics.exposition().decode()
    return {family.name: family for family in text_string_to_metric_families(text)}


def samples(family, suffix: str = "") -> dict:
    return {
        tuple(sorted(sample.labels.items())): sample.value
        for sample in family.samples
        if sample.name == family.name + suffix
    }


def test_exported_names() -> None:
    assert exported_name("/tensorflow/serving/request_count") == ":tensorflow:serving:request_count"
    assert exported_name("/tensorflow/cc/saved_model/load_latency") == (
        ":tensorflow:cc:saved_model:load_latency"
    )
    assert exported_name("9lives/x") == "_9lives:x"


def test_every_family_is_listed_in_name_order_even_without_data() -> None:
    text = ServingMetrics().exposition().decode()
    types = [line.split()[2:] for line in text.splitlines() if line.startswith("# TYPE")]
    names = [name for name, _ in types]
    assert names == sorted(names)
    assert [":tensorflow:serving:request_count", "counter"] in types
    assert [":tensorflow:serving:request_latency", "histogram"] in types
    assert [":tensorflow:serving:runtime_latency", "histogram"] in types
    assert [":tensorflow:serving:batching_session:queuing_latency", "histogram"] in types
    assert [":tensorflow:cc:saved_model:load_attempt_count", "counter"] in types
    assert [":tensorflow:serving:request_example_count_total", "counter"] in types
    assert "_created" not in text and "_total{" not in text


def test_requests_are_counted_and_only_successes_timed() -> None:
    metrics = ServingMetrics()
    with metrics.request("REST", "predict", "m"):
        pass
    with pytest.raises(ServingError), metrics.request("GRPC", "Predict") as record:
        record.model_name = "m"
        raise ServingError(Code.NOT_FOUND, "no such model")
    with metrics.request("REST", "") as record:
        record.status = "INVALID_ARGUMENT"
    parsed = families(metrics)
    counts = parsed[":tensorflow:serving:request_count"]
    assert samples(counts, "_total") == {
        (("model_name", "m"), ("status", "OK")): 1.0,
        (("model_name", "m"), ("status", "NOT_FOUND")): 1.0,
        (("model_name", ""), ("status", "INVALID_ARGUMENT")): 1.0,
    }
    latency = parsed[":tensorflow:serving:request_latency"]
    assert samples(latency, "_count") == {
        (("API", "predict"), ("entrypoint", "REST"), ("model_name", "m")): 1.0
    }
    buckets = [s.labels["le"] for s in latency.samples if s.name.endswith("_bucket")]
    assert len(buckets) == len(LATENCY_BUCKETS) + 1 and buckets[-1] == "+Inf"
    assert buckets[:4] == ["10", "18", "32.4", "58.32"] and "1.27482e+06" in buckets


def test_counters_keep_tf_servings_sample_names() -> None:
    metrics = ServingMetrics()
    metrics.record_load("/m/1", True, {"restore_graph": 0.25, "init_graph": 0.5})
    metrics.record_load("/m/2", False, {})
    text = metrics.exposition().decode()
    assert (
        ':tensorflow:cc:saved_model:load_attempt_count{model_path="/m/1",status="success"} 1'
        in (text)
    )
    assert (
        ':tensorflow:cc:saved_model:load_attempt_count{model_path="/m/2",status="fail"} 1' in text
    )
    assert ':tensorflow:cc:saved_model:load_latency{model_path="/m/1"} 750000' in text
    stages = samples(families(metrics)[":tensorflow:cc:saved_model:load_latency_by_stage"], "_sum")
    assert stages == {
        (("model_path", "/m/1"), ("stage", "restore_graph")): 250000.0,
        (("model_path", "/m/1"), ("stage", "init_graph")): 500000.0,
    }


def test_batching_metrics() -> None:
    metrics = ServingMetrics()
    metrics.record_batch([2, 3], [0.001, 0.002], 8)
    parsed = families(metrics)
    prefix = ":tensorflow:serving:batching_session:"
    assert samples(parsed[prefix + "wrapped_run_count"], "_total") == {(): 1.0}
    assert samples(parsed[prefix + "input_batch_size"], "_sum") == {(): 5.0}
    assert samples(parsed[prefix + "processed_batch_size"], "_sum") == {(): 8.0}
    assert samples(parsed[prefix + "padding_size"], "_sum") == {
        (("execution_batch_size", "8"),): 3.0
    }
    queued = samples(parsed[prefix + "queuing_latency"], "_sum")
    assert queued == {(("thread_pool_name", "model_server_batch_threads"),): pytest.approx(3000.0)}


def test_the_text_is_tf_servings_own_layout() -> None:
    """No HELP and no ``# EOF``, ``{}`` for a point without labels, integer counters,
    ``%g`` limits and sums, label values escaped as TF Serving escapes them."""
    metrics = ServingMetrics()
    metrics.record_batch([1], [0.0], 1)
    metrics.record_load('/m/"quoted"\\1', True, {"restore_graph": 1.2345678})
    lines = metrics.exposition().decode().splitlines()
    assert not [line for line in lines if line.startswith("#") and not line.startswith("# TYPE ")]
    assert ":tensorflow:serving:batching_session:wrapped_run_count{} 1" in lines
    assert ":tensorflow:serving:batching_session:processed_batch_size_count{} 1" in lines
    assert ':tensorflow:serving:batching_session:processed_batch_size_bucket{le="8192"} 1' in lines
    path = '{model_path="/m/\\"quoted\\"\\\\1",stage="restore_graph"}'
    assert f":tensorflow:cc:saved_model:load_latency_by_stage_sum{path} 1.23457e+06" in lines
    assert lines[-1] == "# TYPE :tensorflow:serving:runtime_latency histogram"


def test_a_value_on_a_limit_is_counted_in_the_next_bucket_as_tf_does() -> None:
    metrics = ServingMetrics()
    metrics.record_batch([2], [0.0], 4)
    text = metrics.exposition().decode()
    bucket = ":tensorflow:serving:batching_session:input_batch_size_bucket"
    assert f'{bucket}{{le="2"}} 0' in text and f'{bucket}{{le="4"}} 1' in text


def test_a_model_name_with_a_newline_keeps_the_text_parseable() -> None:
    metrics = ServingMetrics()
    with metrics.request("REST", "predict", "bad\nname"):
        pass
    counts = families(metrics)[":tensorflow:serving:request_count"]
    assert samples(counts, "_total") == {(("model_name", "bad\nname"), ("status", "OK")): 1.0}
