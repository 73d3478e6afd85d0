"""The local backend: everything runs in this process; nothing to start or stop."""


class LocalBackend:
    name = "local"
    offers_ray = False
    launched_ranks = False
    is_main = True
    rank = 0
    size = 1

    def main_first(self, fn):
        return fn()

    def share(self, value):
        return value

    def gather(self, value):
        return [value]

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        return None
