"""The DP-SGD literature's CNNs for MNIST and CIFAR-10: make_model("mnist_cnn" | "cifar10_cnn").

The layer lists are Papernot et al. 2021's ("Tempered Sigmoid Activations for Deep Learning with
Differential Privacy"), as in Opacus's MNIST example and Tramèr & Boneh 2021's CIFAR-10 network.
Each test is fast: a few random images, at most one DP-SGD step.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from rdpest.auditing.dpsgd.models import (
    MODELS,
    PAPER_INPUT_SHAPES,
    cifar10_cnn,
    make_model,
    mnist_cnn,
)
from rdpest.auditing.dpsgd.training import train_dp_sgd
from tests.helpers import flat_parameters

N_FEATURES = {"mnist_cnn": 784, "cifar10_cnn": 3072}


def _n_parameters(net: nn.Module) -> int:
    return sum(p.numel() for p in net.parameters())


def _conv_and_linear(net: nn.Module) -> list[tuple]:
    """Each parameterised layer's defining settings, in order."""
    layers = []
    for m in net:
        if type(m) is nn.Conv2d:
            layers.append(
                ("conv", m.in_channels, m.out_channels, m.kernel_size[0], m.stride[0], m.padding[0])
            )
        elif type(m) is nn.Linear:
            layers.append(("linear", m.in_features, m.out_features))
    return layers


def test_mnist_cnn_layers_and_parameter_count():
    net = make_model("mnist_cnn", 784, 10, input_shape=(1, 28, 28))
    assert type(net) is nn.Sequential
    assert _conv_and_linear(net) == [
        ("conv", 1, 16, 8, 2, 3),
        ("conv", 16, 32, 4, 2, 0),
        ("linear", 32 * 4 * 4, 32),
        ("linear", 32, 10),
    ]
    pools = [(m.kernel_size, m.stride) for m in net if type(m) is nn.MaxPool2d]
    assert pools == [(2, 1), (2, 1)]
    assert sum(type(m) is nn.Tanh for m in net) == 3
    # Weights + biases: 16·1·8·8 + 16 = 1040; 32·16·4·4 + 32 = 8224; 512·32 + 32 = 16 416;
    # 32·10 + 10 = 330; total 26 010.
    assert _n_parameters(net) == 1040 + 8224 + 16416 + 330 == 26010


def test_cifar10_cnn_layers_and_parameter_count():
    net = make_model("cifar10_cnn", 3072, 10, input_shape=(3, 32, 32))
    assert type(net) is nn.Sequential
    assert _conv_and_linear(net) == [
        ("conv", 3, 32, 3, 1, 1),
        ("conv", 32, 32, 3, 1, 1),
        ("conv", 32, 64, 3, 1, 1),
        ("conv", 64, 64, 3, 1, 1),
        ("conv", 64, 128, 3, 1, 1),
        ("conv", 128, 128, 3, 1, 1),
        ("linear", 128 * 4 * 4, 128),
        ("linear", 128, 10),
    ]
    assert [m.kernel_size for m in net if type(m) is nn.MaxPool2d] == [2, 2, 2]
    assert sum(type(m) is nn.Tanh for m in net) == 7
    # 3·3 kernels: (c_in·9 + 1)·c_out per convolution; 896 + 9248 + 18 496 + 36 928 + 73 856
    # + 147 584 = 287 008; dense: 2048·128 + 128 = 262 272 and 128·10 + 10 = 1290.
    assert _n_parameters(net) == 287008 + 262272 + 1290 == 550570


@pytest.mark.parametrize("name", ["mnist_cnn", "cifar10_cnn"])
def test_paper_models_are_plain_sequentials_of_supported_layers(name):
    """Opacus validates them strictly (no BatchNorm or other unsupported layer), and they hold
    only Conv2d, pooling, reshapes, Linear and elementwise tanh, so they can later be stacked."""
    from opacus.validators import ModuleValidator

    net = make_model(name, N_FEATURES[name], 10)
    ModuleValidator.validate(net, strict=True)  # raises on any unsupported module
    allowed = {nn.Conv2d, nn.MaxPool2d, nn.Flatten, nn.Unflatten, nn.Linear, nn.Tanh}
    assert {type(m) for m in net} <= allowed
    assert all(len(list(m.children())) == 0 for m in net)  # no nested containers


@pytest.mark.parametrize("name", ["mnist_cnn", "cifar10_cnn"])
@pytest.mark.parametrize("n_classes", [2, 10, 47])
def test_output_shapes_for_images_and_flat_rows(name, n_classes):
    torch.manual_seed(0)
    net = make_model(name, N_FEATURES[name], n_classes, input_shape=PAPER_INPUT_SHAPES[name])
    images = torch.rand(3, *PAPER_INPUT_SHAPES[name])
    out = net(images)
    assert out.shape == (3, n_classes)
    # A flat row of the same pixels (channels first, row-major) gives the same logits.
    torch.testing.assert_close(net(images.reshape(3, -1)), out, rtol=0, atol=0)


def test_mnist_cnn_accepts_height_by_width_images():
    net = make_model("mnist_cnn", 784, 10, input_shape=(28, 28))
    assert net(torch.zeros(2, 28, 28)).shape == (2, 10)


def test_direct_builders_match_make_model():
    torch.manual_seed(1)
    a = mnist_cnn()
    torch.manual_seed(1)
    b = make_model("mnist_cnn", 784, 10)
    assert torch.equal(flat_parameters(a), flat_parameters(b))
    assert _n_parameters(cifar10_cnn(n_classes=100)) == 550570 - 1290 + 128 * 100 + 100
    assert {"mnist_cnn", "cifar10_cnn"} <= set(MODELS)
    with pytest.raises(ValueError, match="n_classes must be an integer >= 2"):
        mnist_cnn(1)


@pytest.mark.parametrize(
    ("name", "n_features", "input_shape", "needle"),
    [
        ("mnist_cnn", 64, None, "needs 1×28×28 images"),  # the digits
        ("mnist_cnn", 784, (4, 196), "got examples of shape (4, 196)"),
        ("mnist_cnn", 3072, (3, 32, 32), "needs 1×28×28 images"),  # CIFAR-10
        ("cifar10_cnn", 784, (1, 28, 28), "needs 3×32×32 images"),  # MNIST
        ("cifar10_cnn", 1024, (32, 32), "needs 3×32×32 images"),  # grey 32×32
        ("cifar10_cnn", 3072, (32, 32, 3), "X.transpose(0, 3, 1, 2)"),  # channels last
        ("cifar10_cnn", 3072, ("a", 32), "input_shape must be a tuple of integers"),
    ],
)
def test_a_shape_that_does_not_fit_is_a_clear_error(name, n_features, input_shape, needle):
    with pytest.raises(ValueError) as info:
        make_model(name, n_features, 10, input_shape=input_shape)
    assert needle in str(info.value)


@pytest.mark.parametrize("name", ["mnist_cnn", "cifar10_cnn"])
def test_one_dp_sgd_step(name):
    """One full-batch DP-SGD step through Opacus on four random images moves the weights,
    returns the same architecture, and is reproducible by seed (bit for bit, same machine)."""
    rng = np.random.default_rng(0)
    X = rng.random((4, *PAPER_INPUT_SHAPES[name]), dtype=np.float32)
    y = np.array([0, 1, 2, 3])
    torch.manual_seed(0)
    model = make_model(name, N_FEATURES[name], 10, input_shape=PAPER_INPUT_SHAPES[name])
    before = flat_parameters(model).clone()
    settings = {"noise_multiplier": 1.0, "max_grad_norm": 1.0, "steps": 1, "seed": 5}
    trained = train_dp_sgd(model, X, y, **settings)
    after = flat_parameters(trained)
    assert torch.equal(flat_parameters(model), before)  # the input model is left alone
    assert torch.isfinite(after).all() and not torch.equal(after, before)
    assert [type(m) for m in trained] == [type(m) for m in model]
    assert trained(torch.from_numpy(X)).shape == (4, 10)
    assert torch.equal(flat_parameters(train_dp_sgd(model, X, y, **settings)), after)
