"""The ``sagemaker-tfs`` command: one entry point, one subcommand per process kind.

Subcommands import their module lazily so that ``sagemaker-tfs serve`` never pays for
importing TensorFlow, which only ``model-server`` needs.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Sequence

USAGE = """usage: sagemaker-tfs COMMAND [ARGS...]

commands:
  serve          run the serving stack (nginx, Python service, model servers)
  model-server   a TensorFlow-Serving-compatible model server (tensorflow_model_server flags)
  transform      run a SageMaker Batch Transform job locally (or submit it with --on-sagemaker)
"""


# Each subcommand's module, whose ``main(argv)`` runs it; imported only when it runs.
COMMANDS = {
    "serve": "sagemaker_tfs.supervisor.main",
    "model-server": "sagemaker_tfs.model_server.main",
    "transform": "sagemaker_tfs.transform.main",
}


def _run(command: str, argv: Sequence[str]) -> int:
    main: Callable[[Sequence[str]], int] = importlib.import_module(COMMANDS[command]).main
    return main(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        sys.stdout.write(USAGE)
        return 0 if args else 2
    if args[0] not in COMMANDS:
        sys.stderr.write(f"sagemaker-tfs: unknown command {args[0]!r}\n{USAGE}")
        return 2
    return _run(args[0], args[1:])


def serve() -> int:
    """The image's ``serve`` executable: ``docker run IMAGE serve`` lands here."""
    return _run("serve", sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
