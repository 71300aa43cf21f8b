"""A decoder-only (GPT-style) causal language model, generating with a key/value cache.

The same blocks as the encoder (self-attention and feed-forward, pre-norm), with a causal
mask so that position t sees only positions <= t: there is no encoder and no
cross-attention.  Trained to predict the next token, it generates by feeding its own
output back in.  With the key/value cache each new token attends to the stored keys and
values of the prefix instead of recomputing them, so a step costs O(t), not O(t^2).

`gpt_config(...)` configures it exactly like nanoGPT's GPT (GPT-2's architecture): learned
positions, pre-norm blocks, exact GELU, tied input/output embeddings, optional biases,
and GPT-2's initialisation.  transformer/training/nanogpt.py maps nanoGPT's weights onto it.
`llama_config(...)` configures the same model as Llama does, in three changes: RMSNorm for
LayerNorm, a SwiGLU feed-forward for the GELU MLP, rotary positions (RoPE) inside every
attention for the learned table added to the embeddings; outside the blocks, an output
projection of its own (untied) by default.  Neither has biases by default (gpt_config's are
optional, off as in nanoGPT's CPU recipe; Llama has none).
A fourth, grouped-query attention (n_kv_head < n_head: Llama 2 70B's, Llama 3's, Mistral's),
lets groups of query heads share their keys and values, shrinking the key/value cache.
"""

import dataclasses
import math

import numpy as np

import nn
from autograd import Tensor, no_grad
from autograd.kernels import reference
from transformer.config import BlockConfig, check_kv_heads, require
from transformer.decoding import greedy_decode
from transformer.kv_cache import KVCache
from transformer.layers import FEED_FORWARDS, NORMS, SelfAttentionStack, swiglu_hidden_size
from transformer.masks import causal_mask, combine_masks
from transformer.positional import make_positional
from transformer.relative_position import ROPE_PAIRINGS, check_rope_scaling

INITS = ("scaled_embedding", "gpt2")           # DecoderOnly's initialisations (see DecoderOnly._init_gpt2)


@dataclasses.dataclass
class DecoderOnlyConfig(BlockConfig):
    """d_model, num_heads, d_ff, dropout, positional, dtype: see BlockConfig."""
    vocab: int
    num_layers: int = 2
    max_len: int = 32                 # the context length (nanoGPT's block_size)
    pad_id: int | None = 0            # None: no padding token (a text model), no padding mask
    activation: str = "relu"          # the MLP's: a name of transformer/layers.py's FeedForward.ACTIVATIONS
    bias: bool = True                 # biases in every Linear and LayerNorm of the blocks
    head_bias: bool = True            # a bias in the output projection (the "lm head")
    tie_weights: bool = False         # the output projection is the token embedding
    init: str = "scaled_embedding"    # one of INITS
    norm: str = "layer_norm"          # or "rms_norm" (Llama's): transformer/layers.py's make_norm
    feed_forward: str = "mlp"         # or "swiglu" (Llama's, gated by SiLU: activation "silu")
    rope_base: float = 10000.0        # RoPE's theta (positional="rope")
    rope_pairing: str = "half"        # RoPE's pairs of dims: "half" (Hugging Face) or "interleaved" (Meta)
    num_kv_heads: int | None = None   # key/value heads of grouped-query attention (None: num_heads, no grouping)
    rope_scaling: dict | None = None  # RoPE's frequencies stretched: relative_position.py's rope_frequencies
    norm_eps: float = 1e-5            # every norm's eps (1e-6 in most Llamas since Llama 2)
    qkv_bias: bool = False            # biases on q, k, v even when bias is False (Qwen2's attention)

    positive_fields = ("vocab", "num_layers", "max_len")

    def __post_init__(self):
        super().__post_init__()
        for name, allowed in (("norm", NORMS), ("feed_forward", FEED_FORWARDS), ("rope_pairing", ROPE_PAIRINGS),
                              ("init", INITS)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"DecoderOnlyConfig: {name} must be one of {allowed}, got {getattr(self, name)!r}")
        if self.feed_forward == "swiglu" and self.activation != "silu":
            raise ValueError(f"DecoderOnlyConfig: feed_forward='swiglu' is gated by SiLU, so activation must be "
                             f"'silu', got {self.activation!r}")
        if self.num_kv_heads is not None:
            check_kv_heads("DecoderOnlyConfig", self.num_heads, self.num_kv_heads)
            if self.num_kv_heads != self.num_heads and self.score != "scaled_dot":
                raise ValueError(f"DecoderOnlyConfig: grouped-query attention (num_kv_heads={self.num_kv_heads} < "
                                 f"num_heads={self.num_heads}) takes the scaled dot product score, not {self.score!r}")
        number = (int, float)
        require("DecoderOnlyConfig", "rope_base", self.rope_base, isinstance(self.rope_base, number)
                and self.rope_base > 1, "a number > 1")
        require("DecoderOnlyConfig", "norm_eps", self.norm_eps, isinstance(self.norm_eps, number)
                and 0 < self.norm_eps < 1, "a number in (0, 1)")
        if self.rope_scaling is not None:
            try:
                check_rope_scaling(self.rope_scaling)
            except ValueError as err:
                raise ValueError(f"DecoderOnlyConfig: {err}") from None
            if self.positional != "rope":
                raise ValueError(f"DecoderOnlyConfig: rope_scaling scales rotary positions, but positional is "
                                 f"{self.positional!r}")


def gpt_config(vocab, block_size=64, n_layer=4, n_head=4, n_embd=128, dropout=0.0, bias=False, attention="fused",
               activation="gelu"):
    """nanoGPT's GPT under nanoGPT's argument names (its CPU recipe's size by default):
    d_ff = 4 d_model, exact GELU, tied embeddings, no lm-head bias, GPT-2 init, no padding,
    attention as one op as nanoGPT's flash attention runs it (attention="composed": the ops
    a learner steps through). activation: another of FeedForward.ACTIVATIONS, to try one
    (nanoGPT's exporter then refuses the model: its GPT has GELU)."""
    return DecoderOnlyConfig(vocab=vocab, d_model=n_embd, num_heads=n_head, d_ff=4 * n_embd, num_layers=n_layer,
                             max_len=block_size, dropout=dropout, pad_id=None, activation=activation, bias=bias,
                             head_bias=False, tie_weights=True, init="gpt2", attention=attention)


def llama_config(vocab, block_size=64, n_layer=4, n_head=4, n_embd=128, dropout=0.0, tie_weights=False,
                 rope_base=10000.0, rope_pairing="half", d_ff=None, attention="fused", n_kv_head: int | None = None):
    """A Llama-style GPT under gpt_config's argument names: gpt_config's model with RMSNorm,
    a SwiGLU feed-forward (d_ff: 8/3 n_embd rounded up to a multiple of 64 unless given),
    rotary positions (base rope_base, pairs rope_pairing) and no biases; the output
    projection untied from the token embedding, as in Llama 2 (tie_weights=True: tied, as
    in the small Llama 3.2s).  GPT-2's initialisation, as the from-scratch Llamas use.
    n_kv_head (None: n_head): grouped-query attention's key/value heads, n_head a multiple
    of it (1: multi-query attention), as Hugging Face's num_key_value_heads."""
    return DecoderOnlyConfig(vocab=vocab, d_model=n_embd, num_heads=n_head, num_kv_heads=n_kv_head,
                             d_ff=swiglu_hidden_size(n_embd) if d_ff is None else d_ff, num_layers=n_layer,
                             max_len=block_size, dropout=dropout, pad_id=None, positional="rope", activation="silu",
                             rope_base=rope_base, rope_pairing=rope_pairing, norm="rms_norm", feed_forward="swiglu",
                             bias=False, head_bias=False, tie_weights=tie_weights, init="gpt2", attention=attention)


class DecoderOnly(nn.Module):
    """tokens (B, T) -> next-token logits (B, T, vocab)."""

    def __init__(self, config):
        super().__init__()
        self.config = c = config
        self.embed = nn.Embedding(c.vocab, c.d_model)
        self.positional, make_self_score = make_positional(c.positional, c.d_model, c.num_heads, c.max_len,
                                                           c.dropout, c.score, rope_base=c.rope_base,
                                                           rope_pairing=c.rope_pairing, rope_scaling=c.rope_scaling)
        self.blocks = SelfAttentionStack(c.num_layers, c.d_model, c.num_heads, c.d_ff, c.dropout, norm_first=True,
                                         activation=c.activation, bias=c.bias, make_self_score=make_self_score,
                                         fused_attention=c.attention == "fused", norm=c.norm,
                                         feed_forward=c.feed_forward, num_kv_heads=c.num_kv_heads,
                                         norm_eps=c.norm_eps, qkv_bias=c.qkv_bias)
        self.out_proj = nn.Linear(c.d_model, c.vocab, c.head_bias)
        if c.init == "gpt2":
            self._init_gpt2()
        else:
            self.embed.weight.data *= c.d_model ** -0.5
        if c.tie_weights:
            self.out_proj.weight = self.embed.weight   # one Parameter under two names
        self.to(c.dtype)

    def _init_gpt2(self):
        """GPT-2's initialisation: every weight matrix and embedding ~ N(0, 0.02^2), biases 0,
        and the projections that write into the residual stream (attention's out_proj and
        the MLP's second Linear) ~ N(0, (0.02 / sqrt(2 num_layers))^2), so that the sum of
        2 num_layers residual branches keeps its variance at init.  Other parameters (a
        relative position bias) keep their own init."""
        residual_std = 0.02 / math.sqrt(2 * self.config.num_layers)
        matrices = {f"{name}.weight" for name, m in self.named_modules() if isinstance(m, nn.Linear)}
        matrices |= {"embed.weight", "positional.weight"}
        for name, p in self.named_parameters():
            if name.endswith(("self_attn.out_proj.weight", "linear2.weight", "feed_forward.w2.weight")):
                p.data = nn.init.normal(p.shape, residual_std)
            elif name in matrices:
                p.data = nn.init.normal(p.shape, 0.02)
            elif name.endswith(".bias") and "norm" not in name:
                p.data = np.zeros_like(p.data)

    def forward(self, tokens, cache=None):
        """tokens (B, T).  With a KVCache holding positions 0..P-1, tokens are positions
        P..P+T-1: only they are run, attending to the cached keys and values."""
        tokens = np.asarray(tokens)
        if tokens.ndim != 2 or not np.issubdtype(tokens.dtype, np.integer):
            raise ValueError(f"DecoderOnly: tokens must be integer ids of shape (batch, seq), got shape "
                             f"{tokens.shape} dtype {tokens.dtype}")
        past = 0 if cache is None else len(cache)
        if past + tokens.shape[1] > self.config.max_len:
            raise ValueError(f"DecoderOnly: positions {past}..{past + tokens.shape[1] - 1} exceed the context "
                             f"length max_len={self.config.max_len}; crop the context (generate() does)")
        not_pad = np.ones(tokens.shape, bool) if self.config.pad_id is None else tokens != self.config.pad_id
        if cache is not None:                    # query i (position past + i) sees keys 0 .. past + i
            mask = cache.extend(not_pad)                                        # (B, 1, T, past + T)
        else:
            mask = combine_masks(causal_mask(tokens.shape[1]),
                                 None if self.config.pad_id is None else not_pad[:, None, None, :])
            # (T, T) with no padding token, else (B, 1, T, T): broadcast over batch and heads
        h = self.positional(self.embed(tokens), past)                       # (B, T, d_model)
        return self.out_proj(self.blocks(h, mask, cache))                   # (B, T, vocab)

    def new_cache(self):
        """An empty KVCache for generation (forward's cache)."""
        return KVCache(len(self.blocks.layers))

    def generate(self, prompt, steps, temperature=0.0, top_k=None, generator=None, use_cache=True,
                 return_logits=False):
        """Append `steps` tokens to each prompt (B, P).  temperature 0 (or top_k=1) picks the
        most likely token (greedy: the greedy_decode exercise's loop, transformer/decoding.py,
        runs it, the prompt as its source, so that a student copy handing that exercise out
        holds no second greedy loop to copy; the sampling loop below is nanoGPT's, and with
        argmax it would give the same tokens); otherwise each token is sampled from
        softmax(logits / temperature), restricted to the top_k most likely if given, drawing
        from `generator` (a numpy Generator).  Each step's logits come from next_logits.
        Returns the (B, P + steps) tokens, and the logits of every generated step
        (B, steps, vocab) if asked."""
        tokens = np.asarray(prompt)
        if tokens.ndim != 2 or tokens.shape[1] == 0:
            raise ValueError(f"generate: prompt must be (batch, length >= 1) token ids, got shape {tokens.shape}")
        if temperature < 0 or (top_k is not None and top_k < 1):
            raise ValueError(f"generate: need temperature >= 0 and top_k >= 1, got {temperature} and {top_k}")
        if temperature > 0 and generator is None and top_k != 1:
            raise ValueError("generate: sampling (temperature > 0) needs a numpy Generator, for reproducible output")
        if temperature == 0 or top_k == 1:
            source = PromptAsSource(self)       # eos -1: no token is -1, so every row runs all the steps
            generated = greedy_decode(source, tokens, steps, bos=0, eos=-1, pad=0, use_cache=use_cache)
            tokens, step_logits = np.concatenate([tokens, generated], axis=1), source.step_logits
        else:
            step_logits, cache = [], None
            with no_grad():
                for _ in range(steps):
                    last, cache = self.next_logits(tokens, cache, use_cache)          # (B, vocab)
                    step_logits.append(last)
                    new = pick_next_token(last, temperature, top_k, generator)
                    tokens = np.concatenate([tokens, new[:, None]], axis=1)
        return (tokens, np.stack(step_logits, axis=1)) if return_logits else tokens

    def next_logits(self, tokens, cache=None, use_cache=True):
        """(B, vocab) logits of the token after `tokens` (B, t), and the KVCache to pass to the
        next call (None without use_cache).  When the context outgrows max_len only its last
        max_len tokens are fed, as nanoGPT does; the cache is (re)built from them at the first
        call and whenever the window slides, since every position shifts; otherwise only the
        tokens it has not seen are run."""
        context = tokens[:, -self.config.max_len:]
        if not use_cache:
            return self(context).data[:, -1], None
        if cache is None or tokens.shape[1] > self.config.max_len:
            cache = self.new_cache()
            return self(context, cache).data[:, -1], cache
        return self(context[:, len(cache):], cache).data[:, -1], cache


class PromptAsSource:
    """A DecoderOnly seen as greedy_decode's encoder-decoder: the prompt is the source (encode
    keeps it as the memory) and decode continues prompt + the tokens decoded so far (ys
    without its BOS column).  With the cache greedy_decode feeds only the newest token (BOS
    at the first step), so the cache here keeps the tokens so far beside the model's KVCache.
    Each step's (B, vocab) logits are kept in step_logits, for generate(return_logits=True)."""

    def __init__(self, model):
        self.model, self.step_logits = model, []

    def make_src_mask(self, prompt):
        """No source mask: the prompt is read by the model's own causal self-attention."""
        return None

    def encode(self, prompt, src_mask):
        """The prompt itself, as the memory that decode continues."""
        return prompt

    def new_cache(self):
        """The tokens so far and the model's KVCache, both filled at the first decode."""
        return {"tokens": None, "kv": None}

    def decode(self, ys, prompt, src_mask, cache=None):
        """(B, 1, vocab) logits of the token after prompt + ys[:, 1:] (or after the cached
        tokens + ys, the newest token, with a cache)."""
        if cache is None:
            tokens = np.concatenate([prompt, ys[:, 1:]], axis=1)                    # (B, P + t - 1)
        else:
            tokens = prompt if cache["tokens"] is None else np.concatenate([cache["tokens"], ys], axis=1)
            cache["tokens"] = tokens
        last, kv = self.model.next_logits(tokens, None if cache is None else cache["kv"], cache is not None)
        if cache is not None:
            cache["kv"] = kv
        self.step_logits.append(last)
        return Tensor(last[:, None])                                                # (B, 1, vocab)


def pick_next_token(logits, temperature=0.0, top_k=None, generator=None):
    """(B, vocab) logits -> (B,) token ids: argmax if temperature is 0 or top_k is 1, else a
    sample from softmax(logits / temperature) over the top_k largest logits."""
    if temperature == 0 or top_k == 1:
        return logits.argmax(-1)
    scaled = logits.astype(np.float64) / temperature
    if top_k is not None and top_k < scaled.shape[-1]:
        kth = np.partition(scaled, -top_k, axis=-1)[:, -top_k, None]   # the k-th largest per row
        scaled = np.where(scaled < kth, -np.inf, scaled)
    probs = reference.softmax(scaled)                  # the softmax exercise's numpy definition, in float64
    return np.array([generator.choice(len(p), p=p) for p in probs])
