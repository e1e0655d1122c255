"""Model builders: output shapes, no BatchNorm, reproducible init."""

import pytest
import torch
from torch import nn

from fedaudit.models import MODELS, build_model, build_text_model, reads_tokens


@pytest.mark.parametrize("name, c, size", [("mlp", 1, 8), ("cnn", 1, 8), ("cnn", 1, 28),
                                           ("cnn", 3, 32), ("mlp", 3, 32), ("resnet18", 3, 32),
                                           ("resnet18", 1, 28)])
def test_output_shape(name, c, size):
    model = build_model(name, in_channels=c, image_size=size, num_classes=7)
    out = model(torch.rand(2, c, size, size))
    assert out.shape == (2, 7)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_no_batchnorm(name):
    model = (build_text_model(name, vocab_size=10, seq_len=8) if reads_tokens(name)
             else build_model(name, in_channels=3, image_size=32, num_classes=10))
    assert not any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in model.modules())


def test_seeded_init_is_reproducible_and_isolated():
    torch.manual_seed(123)
    a = build_model("cnn", in_channels=1, image_size=8, num_classes=10, seed=5)
    b = build_model("cnn", in_channels=1, image_size=8, num_classes=10, seed=5)
    c = build_model("cnn", in_channels=1, image_size=8, num_classes=10, seed=6)
    for (k, va), vb, vc in zip(a.state_dict().items(), b.state_dict().values(),
                               c.state_dict().values()):
        assert torch.equal(va, vb), k
    assert any(not torch.equal(va, vc) for va, vc in zip(a.state_dict().values(),
                                                         c.state_dict().values()))
    after_builds = torch.rand(1)
    torch.manual_seed(123)
    assert torch.equal(after_builds, torch.rand(1))  # building did not consume the global RNG


def test_unknown_model():
    with pytest.raises(ValueError, match="allowed: "):
        build_model("vgg", in_channels=1, image_size=8, num_classes=10)


def test_image_and_text_builders_refuse_the_other_kind():
    with pytest.raises(ValueError, match="reads token sequences"):
        build_model("transformer", in_channels=1, image_size=8, num_classes=10)
    with pytest.raises(ValueError, match="reads images"):
        build_text_model("cnn", vocab_size=10, seq_len=8)
