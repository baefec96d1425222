"""Fashion-MNIST from Debian's dataset-fashion-mnist (gzip-compressed IDX files) and the CNN
shared by mnist.py and the benchmark: the Python twins of examples/common/fashion_mnist.*."""
import gzip
import os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

DEBIAN_DIR = "/usr/share/datasets/fashion-mnist"
MEAN, STD = 0.2860, 0.3530


def _read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load_split(data_dir=DEBIAN_DIR, train=True, limit=0):
    prefix = "train" if train else "t10k"
    def find(name):
        plain = os.path.join(data_dir, name)
        return plain if os.path.exists(plain) else plain + ".gz"
    images = torch.from_numpy(_read_idx(find(f"{prefix}-images-idx3-ubyte")).copy())
    labels = torch.from_numpy(_read_idx(find(f"{prefix}-labels-idx1-ubyte")).copy())
    if limit:
        images, labels = images[:limit], labels[:limit]
    # In place, like the C++ twin: out-of-place arithmetic would briefly hold several copies
    # of the 188 MB training set and make that transient the run's peak RSS.
    images = images.float().unsqueeze(1)
    images.div_(255).sub_(MEAN).div_(STD)
    return images.contiguous(), labels.long()


class Net(nn.Module):
    """Same layers, shapes and order as examples::MnistCnn."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, padding=1)
        self.conv2 = nn.Conv2d(32, 64, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(32)
        self.bn2 = nn.BatchNorm2d(64)
        self.fc1 = nn.Linear(64 * 7 * 7, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.max_pool2d(F.relu(self.bn2(self.conv2(x))), 2)
        x = F.relu(self.fc1(x.flatten(1)))
        return self.fc2(x)
