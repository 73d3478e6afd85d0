"""The one exception type for mistakes a user can fix.

run.py turns it into a single `error: ...` line and a non-zero exit; anything
else is a bug and keeps its traceback.
"""


class UserError(Exception):
    """Bad input or configuration; the message names the problem and the fix."""


def user_error_in(error: BaseException) -> UserError | None:
    """The UserError behind `error`, also when a Ray task or actor raised it and Ray wrapped
    it (RayTaskError's `cause`, Ray Data's UserCodeException chain); None for a bug."""
    pending: list[BaseException | None] = [error]
    seen: set[int] = set()
    wrapped: UserError | None = None
    while pending:
        current = pending.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        if type(current) is UserError:
            return current  # the original, with its one-line message
        if isinstance(current, UserError):
            wrapped = wrapped or current  # Ray's RayTaskError(UserError): traceback in its text
        pending += [getattr(current, "cause", None), current.__cause__, current.__context__]
    return wrapped
