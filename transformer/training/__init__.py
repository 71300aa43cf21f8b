"""Training: the one loop every model shares (loop.py), the jobs it runs (seq2seq.py: an
encoder-decoder on a toy task; lm.py: a GPT on text, nanoGPT's recipe), the checkpoint
format and everything a run needs to stop and go on (checkpoints.py), and nanoGPT's
checkpoints read and written (nanogpt.py), and Hugging Face's folders (huggingface.py: GPT-2
and Llama in safetensors.py's format, with hf_tokenizer.py's tokenizer.json)."""

from transformer.training.lm import LMTrainConfig, load_lm, train_lm
from transformer.training.loop import train_loop
from transformer.training.seq2seq import TrainConfig, load_model, train

__all__ = ["LMTrainConfig", "load_lm", "train_lm", "train_loop", "TrainConfig", "load_model", "train"]
