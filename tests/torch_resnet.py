"""ResNets as torchvision lays them out and names them (BasicBlock: conv1, bn1, conv2, bn2,
downsample.0/1; the model: conv1, bn1, layer1..N, fc), for tests/resnet_torch_check.py. The
CIFAR variant of He et al. uses a 3x3 stride-1 stem without max pooling, 16-32-64 channels and a
projection shortcut where the shape changes; the ImageNet stem is resnet18's."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                            nn.BatchNorm2d(cout))

    def forward(self, x):
        y = self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x)))))
        return F.relu(y + (x if self.downsample is None else self.downsample(x)))


class ResNet(nn.Module):
    def __init__(self, in_channels, widths, blocks, classes, imagenet_stem=False):
        super().__init__()
        self.imagenet_stem = imagenet_stem
        if imagenet_stem:
            self.conv1 = nn.Conv2d(in_channels, widths[0], 7, 2, 3, bias=False)
        else:
            self.conv1 = nn.Conv2d(in_channels, widths[0], 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(widths[0])
        cin = widths[0]
        for i, w in enumerate(widths):
            stride = 1 if i == 0 else 2
            layer = [BasicBlock(cin, w, stride)] + [BasicBlock(w, w, 1) for _ in range(blocks - 1)]
            setattr(self, "layer%d" % (i + 1), nn.Sequential(*layer))
            cin = w
        self.stages = len(widths)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        if self.imagenet_stem:
            x = F.max_pool2d(x, 3, 2, 1)
        for i in range(self.stages):
            x = getattr(self, "layer%d" % (i + 1))(x)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def cifar_resnet(in_channels, blocks, classes):
    return ResNet(in_channels, [16, 32, 64], blocks, classes)


def resnet18(in_channels, classes, imagenet_stem=True):
    return ResNet(in_channels, [64, 128, 256, 512], 2, classes, imagenet_stem)
