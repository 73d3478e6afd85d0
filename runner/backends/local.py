"""The local backend: everything runs in this process; nothing to start or stop."""


class LocalBackend:
    name = "local"
    is_main = True

    def main_first(self, fn):
        return fn()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        return None
