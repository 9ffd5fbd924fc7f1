"""The ``sagemaker-tfs`` command: one entry point, one subcommand per process kind.

Subcommands import their module lazily so that ``sagemaker-tfs serve`` never pays for
importing TensorFlow, which only ``model-server`` needs.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

USAGE = """usage: sagemaker-tfs COMMAND [ARGS...]

commands:
  serve          run the serving stack (nginx, Python service, model servers)
  model-server   a TensorFlow-Serving-compatible model server (tensorflow_model_server flags)
  transform      run a SageMaker Batch Transform job locally (or submit it with --on-sagemaker)
"""


def _serve(argv: Sequence[str]) -> int:
    from sagemaker_tfs.supervisor import main as supervisor_main

    return supervisor_main.main(argv)


def _model_server(argv: Sequence[str]) -> int:
    from sagemaker_tfs.model_server import main as model_server_main

    return model_server_main.main(argv)


def _transform(argv: Sequence[str]) -> int:
    from sagemaker_tfs.transform import main as transform_main

    return transform_main.main(argv)


COMMANDS: dict[str, Callable[[Sequence[str]], int]] = {
    "serve": _serve,
    "model-server": _model_server,
    "transform": _transform,
}


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        sys.stdout.write(USAGE)
        return 0 if args else 2
    command = COMMANDS.get(args[0])
    if command is None:
        sys.stderr.write(f"sagemaker-tfs: unknown command {args[0]!r}\n{USAGE}")
        return 2
    return command(args[1:])


def serve() -> int:
    """The image's ``serve`` executable: ``docker run IMAGE serve`` lands here."""
    return _serve(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
