"""The assertion message of a failed command names its error even when long output follows it."""

from __future__ import annotations

import subprocess
import sys

from conftest import command_failure


def test_a_stage_traceback_ahead_of_a_long_job_listing_is_in_the_message() -> None:
    script = ("import sys\n"
              "print('error: params.yaml has no key foo', file=sys.stderr)\n"
              "try:\n    raise OSError(28, 'No space left on device')\n"
              "except OSError:\n    import traceback; traceback.print_exc()\n"
              "print('job listing ' * 2000, file=sys.stderr)\n"
              "sys.exit(1)\n")
    cmd = [sys.executable, "-c", script]
    result = subprocess.run(cmd, capture_output=True, text=True)
    message = command_failure(cmd, result, tail=500)
    assert "(exit 1)" in message
    assert "OSError: [Errno 28] No space left on device" in message.split("--- stdout ---")[0]
    assert "error: params.yaml has no key foo" in message.split("--- stdout ---")[0]


def test_a_command_that_printed_no_error_says_so() -> None:
    cmd = [sys.executable, "-c", "import sys; print('done'); sys.exit(3)"]
    message = command_failure(cmd, subprocess.run(cmd, capture_output=True, text=True))
    assert "(exit 3)" in message and "(none printed)" in message and "done" in message
