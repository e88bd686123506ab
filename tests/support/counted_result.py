"""A RunResult that counts the assignments to each of its fields and `extra` keys after it
was created: the tests that a value of a run is written once (one owner) read `writes`."""

import collections

from tfbench.results import RunResult


class _CountedExtra(dict):
    """RunResult.extra counting each key's assignments (`extra[key] = ...`)."""

    def __init__(self, writes: collections.Counter):
        super().__init__()
        self.writes = writes

    def __setitem__(self, key, value):
        self.writes["extra." + key] += 1
        super().__setitem__(key, value)


class CountedResult(RunResult):
    """`writes["name"]`: assignments to the field `name`; `writes["extra.key"]`: to extra[key]
    (update() and setdefault() are not counted)."""

    def __init__(self, **fields):
        super().__init__(**fields)
        writes = collections.Counter()
        self.extra = _CountedExtra(writes)
        self.__dict__["writes"] = writes

    def __setattr__(self, name, value):
        if "writes" in self.__dict__:
            self.writes[name] += 1
        object.__setattr__(self, name, value)
