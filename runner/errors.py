"""The one exception type for mistakes a user can fix.

run.py turns it into a single `error: ...` line and a non-zero exit; anything
else is a bug and keeps its traceback.
"""


class UserError(Exception):
    """Bad input or configuration; the message names the problem and the fix."""
