"""The exit codes every ``kfstack`` command returns (their meaning: :mod:`kfstack.app.cli`)."""

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130
