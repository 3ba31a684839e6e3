"""The command line: one module per `launch.py` command, each with `add_arguments(parser)`
and `main(args) -> int`. These modules parse flags, call the library and print; the work
is done in the packages below them (`annotate`, `db`, `agent`, `training`)."""
