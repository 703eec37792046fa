"""noeira's recurrent language models (src/nn/recurrent_lm.hpp: the lstm-* and gru-* presets) in
PyTorch: nn.Embedding, a two-layer nn.LSTM or nn.GRU (batch_first, zero initial state) and
nn.Linear, named `embed`, `rnn` and `head` as train/name_map.cpp's PyTorch map names them. Used
by tests/safetensors_torch_check.py and benchmarks/pytorch_gpt.py.
"""
import torch
import torch.nn as nn

LAYERS = 2


class RecurrentLm(nn.Module):
    def __init__(self, cell, vocab, block, width, hidden):
        super().__init__()
        self.block = block  # the training window (no limit of the model)
        self.embed = nn.Embedding(vocab, width)
        rnn = {"lstm": nn.LSTM, "gru": nn.GRU}[cell]
        self.rnn = rnn(width, hidden, num_layers=LAYERS, batch_first=True)
        self.head = nn.Linear(hidden, vocab)

    @property
    def vocab(self):
        return self.head.weight.shape[0]

    def forward(self, ids):
        return self.head(self.rnn(self.embed(ids))[0])

    def init_like_noeira(self, generator=None):
        """noeira's initialization for a language model: the embedding and the head's matrix
        from N(0, 0.02), the head's bias 0, the recurrent layers PyTorch's own U(±1/√hidden)."""
        with torch.no_grad():
            self.embed.weight.normal_(0.0, 0.02, generator=generator)
            self.head.weight.normal_(0.0, 0.02, generator=generator)
            self.head.bias.zero_()
            bound = 1.0 / self.rnn.hidden_size ** 0.5
            for p in self.rnn.parameters():
                p.uniform_(-bound, bound, generator=generator)


def noeira_names(model):
    """noeira's walk names (a Sequential of embedding, two layers, head) -> the parameters."""
    names = {"0.weight": model.embed.weight, "3.weight": model.head.weight,
             "3.bias": model.head.bias}
    for k in range(LAYERS):
        for p in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
            names["%d.%s" % (k + 1, p)] = getattr(model.rnn, "%s_l%d" % (p, k))
    return names
