"""Writes the nanoGPT-format fixture the tests read (needs PyTorch, the `bench` extra):

    python -m tests.data.make_nanogpt_fixture

nanogpt_tiny.pt is a checkpoint laid out as nanoGPT's train.py writes it ('model' with the
`_orig_mod.` prefix of a compiled model, 'model_args', 'iter_num', 'config', 'optimizer'),
of a 2-layer, 2-head, 16-wide GPT with biases, trained for a few steps in PyTorch so that
no weight is at its initial value; nanogpt_tiny_meta.pkl is a character vocabulary as
nanoGPT's prepare.py pickles it; nanogpt_tiny_logits.npz holds PyTorch's float32 logits
for two token rows: the reference our engine must reproduce.
"""

import os
import pickle

import numpy as np
import torch

from demos.bench.torch_gpt import TorchGPT

HERE = os.path.dirname(os.path.abspath(__file__))
CHARS = sorted(set("hello world, 0-9!"))


def main():
    torch.manual_seed(0)
    args = dict(n_layer=2, n_head=2, n_embd=16, block_size=8, bias=True, vocab_size=len(CHARS), dropout=0.0)
    model = TorchGPT(len(CHARS), 8, 2, 2, 16, 0.0, bias=True)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    data = torch.randint(0, len(CHARS), (4, 9))
    for _ in range(5):
        loss = torch.nn.functional.cross_entropy(model(data[:, :-1]).reshape(-1, len(CHARS)), data[:, 1:].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    tokens = torch.tensor([[1, 4, 2, 7, 0, 3, 9, 5], [6, 6, 2, 1, 8, 10, 11, 3]])
    with torch.no_grad():
        logits = model(tokens).numpy()
    state = {"_orig_mod." + k: v for k, v in model.state_dict().items()}
    torch.save({"model": state, "optimizer": optimizer.state_dict(), "model_args": args, "iter_num": 5,
                "best_val_loss": torch.tensor(2.5), "config": {"dataset": "fixture", "device": "cpu"}},
               os.path.join(HERE, "nanogpt_tiny.pt"))
    with open(os.path.join(HERE, "nanogpt_tiny_meta.pkl"), "wb") as f:
        pickle.dump({"vocab_size": len(CHARS), "itos": dict(enumerate(CHARS)),
                     "stoi": {c: i for i, c in enumerate(CHARS)}}, f)
    np.savez(os.path.join(HERE, "nanogpt_tiny_logits.npz"), tokens=tokens.numpy(), logits=logits)


if __name__ == "__main__":
    main()
