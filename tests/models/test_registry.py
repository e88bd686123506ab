"""tfbench.models.registry: what a model entry is, and the refusal of a name no entry has."""

from tfbench.models import registry

KNOWN = ["resnet50", "resnet56", "resnet152", "resnet50_v2", "vgg16", "vit_tiny", "trivial"]


def test_an_unknown_model_gets_the_closest_names_and_where_the_list_is():
    assert registry.unknown_model("resnet51", KNOWN) == (
        "Invalid model name 'resnet51': did you mean resnet56, resnet50 or resnet152? "
        "`tfbench models` lists all 7 models")
    assert registry.unknown_model("VGG16", KNOWN) == (
        "Invalid model name 'VGG16': did you mean vgg16? `tfbench models` lists all 7 models")
    assert registry.unknown_model("nosuchnet", KNOWN) == (
        "Invalid model name 'nosuchnet'. `tfbench models` lists all 7 models")
