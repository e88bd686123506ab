"""history.readers: which rows of a results CSV are one run, and the source a directory says."""

from tfbench.history import readers


def row(run_id, **cells):
    base = {"run_id": run_id, "status": "ok", "model": "resnet50", "num_workers": "1",
            "command": "tfbench --model=resnet50"}
    base.update(cells)
    return base


def test_rows_are_one_run_only_when_a_launch_wrote_them_so():
    launch = "tfbench launch --hosts=a,b"
    two = [row("x1", num_workers="2", command=launch), row("x2", num_workers="2",
                                                          command=launch)]
    assert [len(r) for r in readers.runs(two)] == [2]
    assert [len(r) for r in readers.runs(two[:1])] == [1]                  # one row missing
    assert [len(r) for r in readers.runs([two[0], row("y", num_workers="2")])] == [1, 1]
    assert [len(r) for r in readers.runs([two[0], two[0]])] == [1, 1]      # one run id twice
    assert [len(r) for r in readers.runs(two + two[::-1])] == [2, 2]


def test_the_source_is_the_directory_s(tmp_path):
    for marker, source in readers.DIRECTORY_SOURCES:
        top = tmp_path / source
        (top / "points").mkdir(parents=True)
        (top / "runs" / "step").mkdir(parents=True)
        (top / marker).write_text("")
        assert readers.source_of(str(top / "x.csv")) == source
        assert readers.source_of(str(top / "points" / "x.csv")) == source
        assert readers.source_of(str(top / "runs" / "step" / "x.json")) == source
    assert readers.source_of(str(tmp_path / "tfbench_results.csv")) == "import"
