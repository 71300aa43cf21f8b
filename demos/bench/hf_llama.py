"""transformers' LlamaForCausalLM holding the very weights of our Llama-style GPT: the
baseline of `demos.bench.train --model llama` (as demos/bench/torch_gpt.py is the GPT's)."""

import torch
import transformers

from transformer.training.hf_llama import llama_config_json, llama_to_theirs


class LogitsOf(torch.nn.Module):
    """A LlamaForCausalLM called as torch_gpt's TorchGPT is: tokens (B, T) -> logits
    (B, T, vocab), its output projection at `lm_head`.  Hugging Face's attention runs as it
    does by default on CPU (PyTorch's scaled_dot_product_attention)."""

    def __init__(self, model):
        super().__init__()
        self.model, self.lm_head = model, model.lm_head

    def forward(self, tokens):
        return self.model(input_ids=tokens, use_cache=False).logits


def transformers_twin(model):
    """LogitsOf a LlamaForCausalLM of our model's config (its key/value heads included) with
    its weights, named and laid out by the Hugging Face export's own mapping."""
    config = model.config
    spec = llama_config_json(config, {}) | {"num_key_value_heads": config.num_kv_heads or config.num_heads}
    twin = transformers.LlamaForCausalLM(transformers.LlamaConfig(**spec))
    tensors = {name: torch.from_numpy(array.copy()) for name, array in llama_to_theirs(model.state_dict(), config).items()}
    twin.load_state_dict(tensors, strict=not config.tie_weights)       # tied: lm_head is the embedding already
    return LogitsOf(twin)
