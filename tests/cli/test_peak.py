"""`tfbench peak --help`: every default, and the cache file it names."""

from tfbench.measure import peak


def test_help_shows_every_default_and_names_the_cache_file(capsys, tmp_path, monkeypatch):
    from tfbench import cli
    from helpers import ROOT
    assert cli.main(["tfbench", "peak", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    for said in ("(default fp32,bf16)", "(default 2)", "(default 0: 8192 on a GPU, 2048 on a CPU)",
                 "(default 0: 56 on a GPU, 28 on a CPU)", "(default: gpu when one is visible",
                 "cache it in peak.json (under $TFBENCH_CACHE_DIR when set, else "
                 "~/.cache/tfbench)"):
        assert said in text, said
    monkeypatch.setenv("TFBENCH_CACHE_DIR", str(tmp_path))
    assert peak.cache_path() == str(tmp_path / "peak.json")
    with open(ROOT + "/docs/measurements.md") as handle:
        doc = " ".join(handle.read().split())
    assert "`~/.cache/tfbench/peak.json`, or `$TFBENCH_CACHE_DIR/peak.json`" in doc
