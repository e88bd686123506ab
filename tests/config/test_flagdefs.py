"""tfbench.config.flagdefs: the flag table (one spec per name, defaults inside their own
choices and bounds), how an enum's choices are worded, and which TF1-only flags a run set."""


import pytest

from tfbench.config import flagdefs
from tfbench.config.flagdefs import FlagSpec


def test_each_flag_is_one_spec_under_its_name():
    names = [s.name for s in flagdefs.ALL_FLAGS]
    assert len(names) == len(set(names))
    assert flagdefs.BY_NAME == {s.name: s for s in flagdefs.ALL_FLAGS}
    assert {s.role for s in flagdefs.ALL_FLAGS} == set(flagdefs.ROLES)
    assert {s.kind for s in flagdefs.ALL_FLAGS} <= {"bool", "int", "float", "string", "enum",
                                                     "list"}


def test_each_default_is_a_value_its_flag_accepts():
    for s in flagdefs.ALL_FLAGS:
        assert s.help, s.name
        if s.kind == "enum":
            assert s.default in s.enum_values, s.name
        elif s.enum_values is not None:
            assert s.kind == "list", s.name   # a list of names takes choices too
        if s.default is not None and s.kind in ("int", "float"):
            assert s.lower_bound is None or s.default >= s.lower_bound, s.name
            assert s.upper_bound is None or s.default <= s.upper_bound, s.name


@pytest.mark.parametrize("values, default, empty, text", [
    (("a",), "a", "", "a"),
    (("a", "b"), "a", "", "a or b"),
    (("a", "b", "c"), "a", "", "a, b or c"),
    (("", "a", "b"), "", "no choice", "a or b, or empty (the default: no choice)"),
    (("", "a", "b"), "a", "as before", "a or b, or empty (as before)"),
])
def test_choices_are_worded_as_a_sentence(values, default, empty, text):
    assert flagdefs.choices(FlagSpec("x", "enum", default, "h", enum_values=values,
                                     empty=empty)) == text


def test_an_enum_that_takes_empty_must_say_what_it_means():
    with pytest.raises(ValueError, match="flag x accepts an empty value: say what it means"):
        FlagSpec("x", "enum", "", "h", enum_values=("", "a"))


def _changed(spec: FlagSpec):
    """A value of `spec`'s kind other than its default."""
    if spec.kind == "bool":
        return not spec.default
    if spec.kind == "enum":
        return next(v for v in spec.enum_values if v != spec.default)
    if spec.kind in ("int", "float"):
        return (spec.default or 0) + 2
    return "something"


def test_graph_only_overrides_names_each_tf1_flag_set_and_no_other():
    defaults = {s.name: s.default for s in flagdefs.ALL_FLAGS}
    assert flagdefs.graph_only_overrides(defaults) == []
    graph_only = [s for s in flagdefs.ALL_FLAGS if s.role == flagdefs.TF1_ONLY]
    assert {"batch_group_size", "use_datasets", "winograd_nonfused"} <= {s.name for s in
                                                                          graph_only}
    for spec in graph_only:
        values = dict(defaults, **{spec.name: _changed(spec)})
        assert flagdefs.graph_only_overrides(values) == [spec.name]
    # A working flag set names none.
    changed = dict(defaults, model="resnet50", batch_size=32)
    assert flagdefs.graph_only_overrides(changed) == []
