"""config.settings_source: config/settings_groups.py is what the flag table gives."""

import ast

from tfbench.config import flagdefs, settings_source


def test_the_generated_groups_are_the_flag_tables():
    with open(settings_source.PATH, encoding="utf-8") as f:
        assert f.read() == settings_source.render(), (
            "config/settings_groups.py is not what the flag table gives: run "
            "`python -m tfbench.config.settings_source`")


def test_each_field_is_typed_as_its_flag_parses():
    tree = ast.parse(settings_source.render())
    types = {node.target.id: ast.unparse(node.annotation) for node in ast.walk(tree)
             if isinstance(node, ast.AnnAssign)}
    assert types["batch_size"] == "int"                      # default 0
    assert types["num_batches"] == "Optional[int]"           # default None: the legacy rule
    assert types["fp16_loss_scale"] == "Optional[float]"
    assert types["precision"] == "str"                       # an enum
    assert types["eval_during_training_at_specified_steps"] == "tuple[str, ...]"   # a list
    assert types["xla"] == "bool"
    assert set(types) == set(flagdefs.BY_NAME)
