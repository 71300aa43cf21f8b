"""Training: one loop for every model, the jobs it runs, and the files a run reads and writes.

Read, in this order (what one training step of any model goes through):
    loop.py            the one training loop: steps, evaluations, progress, stopping, checkpoints
    seq2seq.py         its job for an encoder-decoder on a toy task (demos.train)
    lm.py              its job for a GPT on text, nanoGPT's recipe (demos.gpt)
    checkpoints.py     the checkpoint format, and everything a run needs to stop and go on

Interop, to skip on a first reading (other programs' files, read and written):
    nanogpt.py         nanoGPT's checkpoints
    huggingface.py     Hugging Face's folders, read (from_hf) and written (save_hf)
    hf_architecture.py what every architecture shares: its names, and the checks its weights meet
    hf_llama.py        the Llama family's configs and weight names: Llama, Qwen2, Mistral
    hf_weights.py      their weights read tensor by tensor into our model, no second copy
    safetensors.py     the safetensors format those folders hold their weights in
    hf_tokenizer.py    Hugging Face's tokenizer.json
"""

from transformer.training.lm import LMTrainConfig, load_lm, train_lm
from transformer.training.loop import train_loop
from transformer.training.seq2seq import TrainConfig, load_model, train

__all__ = ["LMTrainConfig", "load_lm", "train_lm", "train_loop", "TrainConfig", "load_model", "train"]
