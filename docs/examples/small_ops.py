"""Small-tensor arithmetic in a loop, where the dispatcher's cost per call shows: what `codemod hot` profiles in docs/."""
import torch

torch.manual_seed(0)
prices = torch.rand(16, 8) * 100 + 1
weights = torch.rand(8)
for _ in range(10):
    returns = (prices[1:] - prices[:-1]) / prices[:-1]
    scores = torch.cumsum(returns * weights, dim=0).sum(dim=1)
    prices = prices + torch.maximum(scores, torch.zeros_like(scores)).mean()
