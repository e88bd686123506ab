"""A process that adds results to a history store as runs do, for tests/history/test_concurrency.py.

  python history_writer.py URL INDEX COUNT START_FILE add
      waits for START_FILE (every writer starts at once), then adds its worker's row of the run
      'shared' (the workers of one run, added at once) and COUNT results of its own, each
      through record.write (a store opened and closed per result, as a run adds itself); prints
      each console line
  python history_writer.py URL INDEX 1 MARKER hang
      adds one result but stops inside the transaction, its worker rows written and its result
      not yet, after creating MARKER: the test kills it there (kill -9)
"""

import os
import sys
import time


def main(url: str, index: int, count: int, path: str, mode: str) -> None:
    from tfbench.history import record, store

    def row(run_id: str) -> dict:
        return {"run_id": run_id, "status": "ok", "model": "resnet50", "hostname":
                "host%d" % index, "images_per_sec": str(1000 + index), "power_w_mean": "100"}

    if mode == "hang":
        def stop(self, rows, workers):   # inside add_many's transaction, before the result
            open(path, "w").close()
            time.sleep(120)
        store.Recorded.summary = stop
        record.write(url, record.from_rows([row("killed")], "run"))
        return
    # Everything imported and built before the start: the writers meet the store at once.
    import sqlalchemy.dialects.postgresql  # noqa: F401
    import sqlalchemy.dialects.sqlite  # noqa: F401
    if url.startswith("postgresql"):
        import psycopg  # noqa: F401
    shared = record.from_rows([row("shared-%d" % index)], "launch")[0]
    results = [[store.Recorded("shared", "launch", shared.workers, shared.environment)]] + [
        record.from_rows([row("w%d-%d" % (index, i))], "run") for i in range(count)]
    while not os.path.exists(path):
        time.sleep(0.001)
    for result in results:
        print(record.write(url, result), flush=True)

if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5])
