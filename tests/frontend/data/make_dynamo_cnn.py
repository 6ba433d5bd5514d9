"""Writes cnn_dynamo.onnx beside this file: a small CNN exported by torch's default exporter
(`torch.onnx.export(..., dynamo=True)`, which needs onnxscript). Run: python tests/frontend/data/make_dynamo_cnn.py"""

from pathlib import Path

import torch


class Cnn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.body = torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(8, 16, 3, stride=2, padding=1), torch.nn.ReLU())
        self.head = torch.nn.Linear(16 * 4 * 4, 10)

    def forward(self, x):
        return self.head(self.body(x).view(x.shape[0], -1))


if __name__ == "__main__":
    torch.manual_seed(0)
    model = Cnn().eval()
    with torch.no_grad():
        model.body[1].running_mean.uniform_(-0.5, 0.5)
        model.body[1].running_var.uniform_(0.5, 2.0)
    out = Path(__file__).with_name("cnn_dynamo.onnx")
    program = torch.onnx.export(model, (torch.randn(2, 3, 16, 16),), dynamo=True)
    program.save(str(out))
    print(f"wrote {out}")
