"""The `rubric` command line: one module per subcommand, each exposing `register(subparsers)`."""
