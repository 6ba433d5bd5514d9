"""The CNN families of the model zoo that transformers does not carry, written as compact PyTorch modules.

torchvision cannot be imported beside the CPU build of torch (its PyPI wheels need the CUDA runtime), so these are
tilegrad's own definitions of the published architectures, with the layer structure torchvision gives them: the
same blocks, widths and depths at "full" size (the published configuration, 1000 classes). "tiny" keeps every
block kind but fewer blocks and narrower channels, so that the zoo runs in minutes. Batch-norm statistics and
affine parameters are randomised (`build`), so that folding them is checked too.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

CLASSES = 1000


def _conv_bn(cin, cout, k, stride=1, padding=None, groups=1, dilation=1, act=nn.ReLU, eps=1e-5):
    """Convolution without bias, batch norm and an activation (None: none): the unit every family here stacks."""
    padding = (k - 1) // 2 * dilation if padding is None else padding
    layers = [nn.Conv2d(cin, cout, k, stride, padding, dilation=dilation, groups=groups, bias=False),
              nn.BatchNorm2d(cout, eps=eps)]
    return nn.Sequential(*layers, act()) if act is not None else nn.Sequential(*layers)


def _divisible(v: float, divisor: int = 8) -> int:
    """`v` rounded to a multiple of `divisor`, never below 90% of it (the MobileNet/MNASNet channel rule)."""
    rounded = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * v else rounded


# ResNet (bottleneck) as ResNeXt, Wide ResNet and the segmentation backbone ------------------------------------

class Bottleneck(nn.Module):
    """1x1 reduce, 3x3 (grouped for ResNeXt, wider for Wide ResNet, dilated in a segmentation backbone), 1x1
    expand by 4, plus the identity or a projected shortcut."""

    def __init__(self, cin, planes, stride, groups, base_width, dilation):
        super().__init__()
        width = int(planes * base_width / 64) * groups
        self.body = nn.Sequential(_conv_bn(cin, width, 1), _conv_bn(width, width, 3, stride, groups=groups,
                                                                     dilation=dilation),
                                  _conv_bn(width, planes * 4, 1, act=None))
        self.shortcut = (_conv_bn(cin, planes * 4, 1, stride, padding=0, act=None)
                         if stride != 1 or cin != planes * 4 else nn.Identity())

    def forward(self, x):
        return F.relu(self.body(x) + self.shortcut(x))


class ResNetFeatures(nn.Module):
    """The stem and four bottleneck stages; `dilate` turns the last stages' strides into dilation (output stride
    8, as the FCN and DeepLabV3 backbones use)."""

    def __init__(self, depths, stem=64, groups=1, base_width=64, dilate=(False, False, False)):
        super().__init__()
        self.stem = nn.Sequential(_conv_bn(3, stem, 7, 2, 3), nn.MaxPool2d(3, 2, 1))
        stages, cin, dilation = [], stem, 1
        for i, depth in enumerate(depths):
            planes, stride, previous = stem * 2 ** i, 1 if i == 0 else 2, dilation
            if i > 0 and dilate[i - 1]:
                dilation, stride = dilation * stride, 1
            blocks = []
            for j in range(depth):
                # A dilated stage's first block keeps the previous dilation, as the published backbone does.
                blocks.append(Bottleneck(cin, planes, stride if j == 0 else 1, groups, base_width,
                                         previous if j == 0 else dilation))
                cin = planes * 4
            stages.append(nn.Sequential(*blocks))
        self.stages, self.channels = nn.Sequential(*stages), cin

    def forward(self, x):
        return self.stages(self.stem(x))


class ResNetClassifier(nn.Module):
    """A bottleneck ResNet with global average pooling and a linear classifier."""

    def __init__(self, depths, stem=64, groups=1, base_width=64):
        super().__init__()
        self.features = ResNetFeatures(depths, stem, groups, base_width)
        self.fc = nn.Linear(self.features.channels, CLASSES)

    def forward(self, x):
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(self.features(x), 1), 1))


# VGG -------------------------------------------------------------------------------------------------------------

class VGG(nn.Module):
    """Stacks of 3x3 convolutions (with batch norm in the _bn variant) between max pools, pooled to 7x7, and
    three linear layers with dropout."""

    def __init__(self, plan, batch_norm, hidden=4096):
        super().__init__()
        layers, cin = [], 3
        for item in plan:
            if item == "M":
                layers.append(nn.MaxPool2d(2, 2))
                continue
            conv = nn.Conv2d(cin, item, 3, padding=1)
            layers += [conv, nn.BatchNorm2d(item), nn.ReLU()] if batch_norm else [conv, nn.ReLU()]
            cin = item
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Linear(cin * 49, hidden), nn.ReLU(), nn.Dropout(),
                                        nn.Linear(hidden, hidden), nn.ReLU(), nn.Dropout(), nn.Linear(hidden, CLASSES))

    def forward(self, x):
        return self.classifier(torch.flatten(F.adaptive_avg_pool2d(self.features(x), 7), 1))


# DenseNet --------------------------------------------------------------------------------------------------------

class DenseLayer(nn.Module):
    """BN-ReLU-1x1 to bn_size * growth, BN-ReLU-3x3 to growth; its output joins the block's concatenation."""

    def __init__(self, cin, growth, bn_size):
        super().__init__()
        self.body = nn.Sequential(nn.BatchNorm2d(cin), nn.ReLU(), nn.Conv2d(cin, bn_size * growth, 1, bias=False),
                                  nn.BatchNorm2d(bn_size * growth), nn.ReLU(),
                                  nn.Conv2d(bn_size * growth, growth, 3, padding=1, bias=False))

    def forward(self, x):
        return torch.cat([x, self.body(x)], 1)


class DenseNet(nn.Module):
    """Dense blocks joined by transitions (BN-ReLU-1x1 halving the channels, 2x2 average pool)."""

    def __init__(self, growth, blocks, stem, bn_size=4):
        super().__init__()
        layers, cin = [nn.Conv2d(3, stem, 7, 2, 3, bias=False), nn.BatchNorm2d(stem), nn.ReLU(),
                       nn.MaxPool2d(3, 2, 1)], stem
        for i, n in enumerate(blocks):
            for _ in range(n):
                layers.append(DenseLayer(cin, growth, bn_size))
                cin += growth
            if i < len(blocks) - 1:
                layers += [nn.BatchNorm2d(cin), nn.ReLU(), nn.Conv2d(cin, cin // 2, 1, bias=False), nn.AvgPool2d(2)]
                cin //= 2
        self.features = nn.Sequential(*layers, nn.BatchNorm2d(cin), nn.ReLU())
        self.fc = nn.Linear(cin, CLASSES)

    def forward(self, x):
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(self.features(x), 1), 1))


# GoogLeNet and Inception v3 ---------------------------------------------------------------------------------------

def _unit(cin, cout, k, stride=1, padding=0):
    """The Inception networks' BasicConv2d: convolution, batch norm (eps 1e-3), ReLU; k may be (kh, kw)."""
    return nn.Sequential(nn.Conv2d(cin, cout, k, stride, padding, bias=False), nn.BatchNorm2d(cout, eps=1e-3),
                         nn.ReLU())


class Branches(nn.Module):
    """Parallel branches over one input, concatenated along channels: every Inception module."""

    def __init__(self, *branches):
        super().__init__()
        self.branches = nn.ModuleList(branches)

    def forward(self, x):
        return torch.cat([b(x) for b in self.branches], 1)


def _googlenet_module(cin, c1, c3r, c3, c5r, c5, pool):
    """GoogLeNet's Inception module; the "5x5" branch uses a 3x3 kernel, as torchvision's version does."""
    return Branches(_unit(cin, c1, 1), nn.Sequential(_unit(cin, c3r, 1), _unit(c3r, c3, 3, padding=1)),
                    nn.Sequential(_unit(cin, c5r, 1), _unit(c5r, c5, 3, padding=1)),
                    nn.Sequential(nn.MaxPool2d(3, 1, 1, ceil_mode=True), _unit(cin, pool, 1)))


GOOGLENET = [(64, 96, 128, 16, 32, 32), (128, 128, 192, 32, 96, 64), "M", (192, 96, 208, 16, 48, 64),
             (160, 112, 224, 24, 64, 64), (128, 128, 256, 24, 64, 64), (112, 144, 288, 32, 64, 64),
             (256, 160, 320, 32, 128, 128), "M2", (256, 160, 320, 32, 128, 128), (384, 192, 384, 48, 128, 128)]


class GoogLeNet(nn.Module):
    """GoogLeNet (Inception v1) with batch norm, as evaluated (no auxiliary classifiers); `div` narrows every
    width and `plan` picks the modules."""

    def __init__(self, plan=GOOGLENET, div=1):
        super().__init__()
        w = lambda c: max(c // div, 4)
        layers = [_unit(3, w(64), 7, 2, 3), nn.MaxPool2d(3, 2, ceil_mode=True), _unit(w(64), w(64), 1),
                  _unit(w(64), w(192), 3, padding=1), nn.MaxPool2d(3, 2, ceil_mode=True)]
        cin = w(192)
        for item in plan:
            if item in ("M", "M2"):
                layers.append(nn.MaxPool2d(3, 2, ceil_mode=True) if item == "M" else nn.MaxPool2d(2, 2, ceil_mode=True))
                continue
            c1, c3r, c3, c5r, c5, pool = (w(c) for c in item)
            layers.append(_googlenet_module(cin, c1, c3r, c3, c5r, c5, pool))
            cin = c1 + c3 + c5 + pool
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(cin, CLASSES))

    def forward(self, x):
        return self.classifier(torch.flatten(F.adaptive_avg_pool2d(self.features(x), 1), 1))


def _inception_a(cin, pool, w):
    return Branches(_unit(cin, w(64), 1), nn.Sequential(_unit(cin, w(48), 1), _unit(w(48), w(64), 5, padding=2)),
                    nn.Sequential(_unit(cin, w(64), 1), _unit(w(64), w(96), 3, padding=1),
                                  _unit(w(96), w(96), 3, padding=1)),
                    nn.Sequential(nn.AvgPool2d(3, 1, 1), _unit(cin, pool, 1))), w(64) + w(64) + w(96) + pool


def _inception_b(cin, w):
    return Branches(_unit(cin, w(384), 3, 2), nn.Sequential(_unit(cin, w(64), 1), _unit(w(64), w(96), 3, padding=1),
                                                            _unit(w(96), w(96), 3, 2)),
                    nn.MaxPool2d(3, 2)), w(384) + w(96) + cin


def _inception_c(cin, c7, w):
    """The factorised 7x7 module: 1x7 and 7x1 convolutions in sequence."""
    row, col = ((1, 7), (0, 3)), ((7, 1), (3, 0))
    return Branches(_unit(cin, w(192), 1),
                    nn.Sequential(_unit(cin, c7, 1), _unit(c7, c7, row[0], padding=row[1]),
                                  _unit(c7, w(192), col[0], padding=col[1])),
                    nn.Sequential(_unit(cin, c7, 1), _unit(c7, c7, col[0], padding=col[1]),
                                  _unit(c7, c7, row[0], padding=row[1]), _unit(c7, c7, col[0], padding=col[1]),
                                  _unit(c7, w(192), row[0], padding=row[1])),
                    nn.Sequential(nn.AvgPool2d(3, 1, 1), _unit(cin, w(192), 1))), 4 * w(192)


def _inception_d(cin, w):
    return Branches(nn.Sequential(_unit(cin, w(192), 1), _unit(w(192), w(320), 3, 2)),
                    nn.Sequential(_unit(cin, w(192), 1), _unit(w(192), w(192), (1, 7), padding=(0, 3)),
                                  _unit(w(192), w(192), (7, 1), padding=(3, 0)), _unit(w(192), w(192), 3, 2)),
                    nn.MaxPool2d(3, 2)), w(320) + w(192) + cin


class _Split(nn.Module):
    """A 1x3 and a 3x1 convolution over the same input, concatenated: Inception v3's expanded-filter-bank unit."""

    def __init__(self, cin, cout):
        super().__init__()
        self.row, self.col = _unit(cin, cout, (1, 3), padding=(0, 1)), _unit(cin, cout, (3, 1), padding=(1, 0))

    def forward(self, x):
        return torch.cat([self.row(x), self.col(x)], 1)


def _inception_e(cin, w):
    return Branches(_unit(cin, w(320), 1), nn.Sequential(_unit(cin, w(384), 1), _Split(w(384), w(384))),
                    nn.Sequential(_unit(cin, w(448), 1), _unit(w(448), w(384), 3, padding=1), _Split(w(384), w(384))),
                    nn.Sequential(nn.AvgPool2d(3, 1, 1), _unit(cin, w(192), 1))), w(320) + 4 * w(384) + w(192)


class InceptionV3(nn.Module):
    """Inception v3 as evaluated (no auxiliary classifier): the stem, 3 x A, B, 4 x C (7x7 widths 128, 160, 160,
    192), D, 2 x E. `div` narrows every width; `short` keeps one module of each kind."""

    def __init__(self, div=1, short=False):
        super().__init__()
        w = lambda c: max(c // div, 4)
        layers = [_unit(3, w(32), 3, 2), _unit(w(32), w(32), 3), _unit(w(32), w(64), 3, padding=1),
                  nn.MaxPool2d(3, 2), _unit(w(64), w(80), 1), _unit(w(80), w(192), 3), nn.MaxPool2d(3, 2)]
        cin = w(192)
        for pool in ([w(32)] if short else [w(32), w(64), w(64)]):
            block, cin = _inception_a(cin, pool, w)
            layers.append(block)
        block, cin = _inception_b(cin, w)
        layers.append(block)
        for c7 in ([w(128)] if short else [w(128), w(160), w(160), w(192)]):
            block, cin = _inception_c(cin, c7, w)
            layers.append(block)
        block, cin = _inception_d(cin, w)
        layers.append(block)
        for _ in range(1 if short else 2):
            block, cin = _inception_e(cin, w)
            layers.append(block)
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Dropout(0.5), nn.Linear(cin, CLASSES))

    def forward(self, x):
        return self.classifier(torch.flatten(F.adaptive_avg_pool2d(self.features(x), 1), 1))


# ShuffleNet v2 and SqueezeNet ------------------------------------------------------------------------------------

class ShuffleUnit(nn.Module):
    """ShuffleNet v2's unit: half the channels pass (stride 1) or both halves are convolved (stride 2), then
    the two groups are interleaved (channel shuffle)."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        half = cout // 2
        self.stride = stride
        if stride > 1:
            self.left = nn.Sequential(_conv_bn(cin, cin, 3, stride, groups=cin, act=None), _conv_bn(cin, half, 1))
        self.right = nn.Sequential(_conv_bn(cin if stride > 1 else half, half, 1),
                                   _conv_bn(half, half, 3, stride, groups=half, act=None), _conv_bn(half, half, 1))

    def forward(self, x):
        if self.stride == 1:
            keep, work = x.chunk(2, dim=1)
            out = torch.cat([keep, self.right(work)], 1)
        else:
            out = torch.cat([self.left(x), self.right(x)], 1)
        n, c, h, w = out.shape
        return out.view(n, 2, c // 2, h, w).transpose(1, 2).reshape(n, c, h, w)


class ShuffleNetV2(nn.Module):
    """ShuffleNet v2: a 3x3 stem, max pool, three stages of shuffle units, a 1x1 convolution, global pooling."""

    def __init__(self, repeats, widths):
        super().__init__()
        layers, cin = [_conv_bn(3, widths[0], 3, 2), nn.MaxPool2d(3, 2, 1)], widths[0]
        for n, cout in zip(repeats, widths[1:-1]):
            layers += [ShuffleUnit(cin, cout, 2)] + [ShuffleUnit(cout, cout, 1) for _ in range(n - 1)]
            cin = cout
        self.features = nn.Sequential(*layers, _conv_bn(cin, widths[-1], 1))
        self.fc = nn.Linear(widths[-1], CLASSES)

    def forward(self, x):
        return self.fc(self.features(x).mean([2, 3]))


class Fire(nn.Module):
    """SqueezeNet's fire module: a 1x1 squeeze, then 1x1 and 3x3 expands concatenated."""

    def __init__(self, cin, squeeze, e1, e3):
        super().__init__()
        self.squeeze = nn.Sequential(nn.Conv2d(cin, squeeze, 1), nn.ReLU())
        self.expand = Branches(nn.Sequential(nn.Conv2d(squeeze, e1, 1), nn.ReLU()),
                               nn.Sequential(nn.Conv2d(squeeze, e3, 3, padding=1), nn.ReLU()))

    def forward(self, x):
        return self.expand(self.squeeze(x))


SQUEEZENET = [(16, 64), (16, 64), (32, 128), "M", (32, 128), (48, 192), (48, 192), (64, 256), "M", (64, 256)]


class SqueezeNet(nn.Module):
    """SqueezeNet 1.0: a 7x7 stem, fire modules between ceil-mode max pools, a 1x1 convolution classifier."""

    def __init__(self, plan=SQUEEZENET, div=1):
        super().__init__()
        layers, cin = [nn.Conv2d(3, 96 // div, 7, 2), nn.ReLU(), nn.MaxPool2d(3, 2, ceil_mode=True)], 96 // div
        for item in plan:
            if item == "M":
                layers.append(nn.MaxPool2d(3, 2, ceil_mode=True))
                continue
            squeeze, expand = item[0] // div, item[1] // div
            layers.append(Fire(cin, squeeze, expand, expand))
            cin = 2 * expand
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Dropout(0.5), nn.Conv2d(cin, CLASSES, 1), nn.ReLU(),
                                        nn.AdaptiveAvgPool2d(1))

    def forward(self, x):
        return torch.flatten(self.classifier(self.features(x)), 1)


# MNASNet and MobileNet v3 ----------------------------------------------------------------------------------------

class InvertedResidual(nn.Module):
    """1x1 expansion (skipped when the factor is 1), depthwise kxk, optional squeeze-and-excitation, 1x1
    projection; the input is added back when the shapes allow."""

    def __init__(self, cin, k, expanded, cout, stride, act=nn.ReLU, se=False):
        super().__init__()
        layers = [] if expanded == cin else [_conv_bn(cin, expanded, 1, act=act)]
        layers.append(_conv_bn(expanded, expanded, k, stride, groups=expanded, act=act))
        if se:
            layers.append(SqueezeExcite(expanded, _divisible(expanded // 4)))
        layers.append(_conv_bn(expanded, cout, 1, act=None))
        self.body, self.residual = nn.Sequential(*layers), stride == 1 and cin == cout

    def forward(self, x):
        return x + self.body(x) if self.residual else self.body(x)


class SqueezeExcite(nn.Module):
    """Channel attention: global average, 1x1 down with ReLU, 1x1 up with hard sigmoid, scale the input."""

    def __init__(self, channels, squeeze):
        super().__init__()
        self.down, self.up = nn.Conv2d(channels, squeeze, 1), nn.Conv2d(squeeze, channels, 1)

    def forward(self, x):
        return x * F.hardsigmoid(self.up(F.relu(self.down(F.adaptive_avg_pool2d(x, 1)))))


# (out channels, kernel, stride, expansion, repeats) per MNASNet-B1 stack, at width 1.0
MNASNET = [(24, 3, 2, 3, 3), (40, 5, 2, 3, 3), (80, 5, 2, 6, 3), (96, 3, 1, 6, 2), (192, 5, 2, 6, 4),
           (320, 3, 1, 6, 1)]


class MNASNet(nn.Module):
    """MNASNet-B1: a stem with a depthwise separable convolution, six inverted-residual stacks, a 1x1 to 1280."""

    def __init__(self, alpha=1.0, plan=MNASNET):
        super().__init__()
        c = lambda n: _divisible(n * alpha)
        layers = [_conv_bn(3, c(32), 3, 2), _conv_bn(c(32), c(32), 3, groups=c(32)), _conv_bn(c(32), c(16), 1,
                                                                                               act=None)]
        cin = c(16)
        for out, k, stride, expand, repeats in plan:
            for i in range(repeats):
                layers.append(InvertedResidual(cin, k, cin * expand, c(out), stride if i == 0 else 1))
                cin = c(out)
        self.features = nn.Sequential(*layers, _conv_bn(cin, 1280, 1))
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(1280, CLASSES))

    def forward(self, x):
        return self.classifier(self.features(x).mean([2, 3]))


# (kernel, expanded, out, squeeze-excite, hard swish, stride) per MobileNet v3 Large block
MOBILENET_V3_LARGE = [(3, 16, 16, False, False, 1), (3, 64, 24, False, False, 2), (3, 72, 24, False, False, 1),
                      (5, 72, 40, True, False, 2), (5, 120, 40, True, False, 1), (5, 120, 40, True, False, 1),
                      (3, 240, 80, False, True, 2), (3, 200, 80, False, True, 1), (3, 184, 80, False, True, 1),
                      (3, 184, 80, False, True, 1), (3, 480, 112, True, True, 1), (3, 672, 112, True, True, 1),
                      (5, 672, 160, True, True, 2), (5, 960, 160, True, True, 1), (5, 960, 160, True, True, 1)]


class MobileNetV3(nn.Module):
    """MobileNet v3 Large: a hard-swish stem, inverted residuals with squeeze-excitation and hard swish where the
    table says, a 1x1 to 6x the last width, then a 1280-wide hidden linear layer."""

    def __init__(self, plan=MOBILENET_V3_LARGE, width=1.0, last=1280):
        super().__init__()
        c = lambda n: _divisible(n * width)
        layers, cin = [_conv_bn(3, c(16), 3, 2, act=nn.Hardswish)], c(16)
        for k, expanded, out, se, hard, stride in plan:
            layers.append(InvertedResidual(cin, k, c(expanded), c(out), stride, nn.Hardswish if hard else nn.ReLU,
                                           se))
            cin = c(out)
        self.features = nn.Sequential(*layers, _conv_bn(cin, 6 * cin, 1, act=nn.Hardswish))
        self.classifier = nn.Sequential(nn.Linear(6 * cin, last), nn.Hardswish(), nn.Dropout(0.2),
                                        nn.Linear(last, CLASSES))

    def forward(self, x):
        return self.classifier(torch.flatten(F.adaptive_avg_pool2d(self.features(x), 1), 1))


# Segmentation heads on a dilated ResNet ---------------------------------------------------------------------------

class ASPP(nn.Module):
    """Atrous spatial pyramid pooling: a 1x1 branch, three dilated 3x3 branches and an image-pooling branch,
    concatenated and projected."""

    def __init__(self, cin, rates, cout=256):
        super().__init__()
        self.branches = nn.ModuleList([_conv_bn(cin, cout, 1)] + [_conv_bn(cin, cout, 3, dilation=r) for r in rates])
        self.pool = nn.Sequential(nn.AdaptiveAvgPool2d(1), _conv_bn(cin, cout, 1))
        self.project = nn.Sequential(_conv_bn((len(rates) + 2) * cout, cout, 1), nn.Dropout(0.5))

    def forward(self, x):
        pooled = F.interpolate(self.pool(x), size=x.shape[-2:], mode="bilinear", align_corners=False)
        return self.project(torch.cat([b(x) for b in self.branches] + [pooled], 1))


class Segmenter(nn.Module):
    """A dilated bottleneck ResNet (output stride 8) with an FCN head or a DeepLabV3 head (ASPP), upsampled
    bilinearly to the input's size: per-pixel scores for 21 classes."""

    def __init__(self, depths, stem=64, head="fcn", rates=(12, 24, 36), width=None):
        super().__init__()
        self.backbone = ResNetFeatures(depths, stem, dilate=(False, True, True))
        cin = self.backbone.channels
        if head == "fcn":
            inner = width or cin // 4
            self.head = nn.Sequential(_conv_bn(cin, inner, 3), nn.Dropout(0.1), nn.Conv2d(inner, 21, 1))
        else:
            inner = width or 256
            self.head = nn.Sequential(ASPP(cin, rates, inner), _conv_bn(inner, inner, 3), nn.Conv2d(inner, 21, 1))

    def forward(self, x):
        return F.interpolate(self.head(self.backbone(x)), size=x.shape[-2:], mode="bilinear", align_corners=False)


# The zoo's entries -------------------------------------------------------------------------------------------------

# name -> (full-size constructor, tiny constructor, full input side, tiny input side)
VISION = {
    "resnext50_32x4d": (lambda: ResNetClassifier([3, 4, 6, 3], groups=32, base_width=4),
                        lambda: ResNetClassifier([1, 1, 1, 1], stem=16, groups=4, base_width=16), 224, 64),
    "wide_resnet50_2": (lambda: ResNetClassifier([3, 4, 6, 3], base_width=128),
                        lambda: ResNetClassifier([1, 1, 1, 1], stem=16, base_width=128), 224, 64),
    "vgg16": (lambda: VGG([64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"],
                          False),
              lambda: VGG([8, "M", 16, "M", 32, 32, "M", 64, "M", 64, "M"], False, hidden=128), 224, 64),
    "vgg16_bn": (lambda: VGG([64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512,
                              "M"], True),
                 lambda: VGG([8, "M", 16, "M", 32, 32, "M", 64, "M", 64, "M"], True, hidden=128), 224, 64),
    "densenet121": (lambda: DenseNet(32, (6, 12, 24, 16), 64), lambda: DenseNet(8, (2, 2, 2, 2), 16), 224, 64),
    "inception_v3": (lambda: InceptionV3(), lambda: InceptionV3(div=8, short=True), 299, 75),
    "googlenet": (lambda: GoogLeNet(),
                  lambda: GoogLeNet([GOOGLENET[0], "M", GOOGLENET[3], "M2", GOOGLENET[-1]], div=8), 224, 64),
    "shufflenet_v2": (lambda: ShuffleNetV2([4, 8, 4], [24, 116, 232, 464, 1024]),
                      lambda: ShuffleNetV2([2, 1, 1], [8, 16, 32, 64, 128]), 224, 64),
    "squeezenet1_0": (lambda: SqueezeNet(), lambda: SqueezeNet([(16, 64), "M", (32, 128), "M", (64, 256)], div=4),
                      224, 64),
    "mnasnet1_0": (lambda: MNASNet(), lambda: MNASNet(0.5, [(out, k, s, e, 1) for out, k, s, e, _ in MNASNET]),
                   224, 64),
    "mobilenet_v3_large": (lambda: MobileNetV3(),
                           lambda: MobileNetV3([MOBILENET_V3_LARGE[i] for i in (0, 1, 3, 4, 6, 10, 12)], 0.5, 128),
                           224, 64),
    "fcn_resnet50": (lambda: Segmenter([3, 4, 6, 3]), lambda: Segmenter([1, 1, 1, 1], stem=16), 224, 64),
    "deeplabv3_resnet50": (lambda: Segmenter([3, 4, 6, 3], head="deeplabv3"),
                           lambda: Segmenter([1, 1, 1, 1], stem=16, head="deeplabv3", rates=(2, 3, 4), width=32),
                           224, 64),
}


def _randomise_batch_norms(model: nn.Module, g: torch.Generator) -> None:
    """Random running statistics and affine parameters, so that a wrong batch-norm fold shows in the output."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.copy_(torch.randn(m.num_features, generator=g) * 0.1)
                m.running_var.copy_(torch.rand(m.num_features, generator=g) + 0.5)
                m.weight.copy_(torch.rand(m.num_features, generator=g) + 0.5)
                m.bias.copy_(torch.randn(m.num_features, generator=g) * 0.1)


def build(name: str, size: str) -> tuple[nn.Module, tuple[torch.Tensor]]:
    """The model `name` in eval mode with seeded random weights, and a seeded 1x3xSxS image."""
    full, tiny, full_side, tiny_side = VISION[name]
    torch.manual_seed(0)
    model = (full if size == "full" else tiny)().eval()
    g = torch.Generator().manual_seed(0)
    _randomise_batch_norms(model, g)
    side = full_side if size == "full" else tiny_side
    return model, (torch.randn(1, 3, side, side, generator=g),)
