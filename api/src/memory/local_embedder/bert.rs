//! The BERT encoder of a sentence-transformers model (all-MiniLM-L6-v2 and its
//! family): weights from `model.safetensors`, shapes from `config.json`, one
//! text at a time (no padding, so no attention mask), then pooling (the mean
//! over the tokens, or the first token's state for CLS-pooled models such as
//! bge-small-en-v1.5) and L2 normalisation, as `SentenceTransformer.encode(...,
//! normalize_embeddings=True)` does.

use ndarray::{Array1, Array2, ArrayView2, Axis, Slice};
use safetensors::{Dtype, SafeTensors};
use serde::Deserialize;

use super::LocalError;

/// The fields of a Hugging Face `config.json` the encoder needs.
#[derive(Debug, Deserialize)]
pub struct BertConfig {
    pub hidden_size: usize,
    pub num_attention_heads: usize,
    pub num_hidden_layers: usize,
    pub intermediate_size: usize,
    pub max_position_embeddings: usize,
    #[serde(default = "default_eps")]
    pub layer_norm_eps: f64,
    #[serde(default)]
    pub hidden_act: Option<String>,
    #[serde(default)]
    pub position_embedding_type: Option<String>,
    #[serde(default)]
    pub model_type: Option<String>,
}

fn default_eps() -> f64 {
    1e-12
}

impl BertConfig {
    fn check(&self) -> Result<(), LocalError> {
        let unsupported =
            |what: String| Err(LocalError::Model(format!("config.json: {what} is not supported")));
        if let Some(kind) = self.model_type.as_deref().filter(|k| *k != "bert") {
            return unsupported(format!("model_type {kind:?} (only \"bert\")"));
        }
        if let Some(act) = self.hidden_act.as_deref().filter(|a| *a != "gelu") {
            return unsupported(format!("hidden_act {act:?} (only \"gelu\")"));
        }
        if let Some(kind) = self
            .position_embedding_type
            .as_deref()
            .filter(|k| *k != "absolute")
        {
            return unsupported(format!("position_embedding_type {kind:?} (only \"absolute\")"));
        }
        if self.num_attention_heads == 0 || !self.hidden_size.is_multiple_of(self.num_attention_heads) {
            return unsupported(format!(
                "hidden_size {} with {} attention heads",
                self.hidden_size, self.num_attention_heads
            ));
        }
        Ok(())
    }
}

/// How a sentence vector is read from the token states (the model's
/// `1_Pooling/config.json`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pooling {
    /// The mean over every token (all-MiniLM-L6-v2).
    Mean,
    /// The first token's (`[CLS]`) state (the BGE family).
    Cls,
}

struct Linear {
    /// Stored as in the checkpoint: (out, in).
    weight: Array2<f32>,
    bias: Array1<f32>,
}

impl Linear {
    fn forward(&self, x: &ArrayView2<f32>) -> Array2<f32> {
        let mut y = x.dot(&self.weight.t());
        y += &self.bias;
        y
    }
}

struct LayerNorm {
    weight: Array1<f32>,
    bias: Array1<f32>,
    eps: f32,
}

impl LayerNorm {
    fn apply(&self, x: &mut Array2<f32>) {
        let width = x.ncols() as f32;
        for mut row in x.rows_mut() {
            let mean = row.sum() / width;
            let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / width;
            let inv = 1.0 / (var + self.eps).sqrt();
            for ((v, w), b) in row.iter_mut().zip(&self.weight).zip(&self.bias) {
                *v = (*v - mean) * inv * w + b;
            }
        }
    }
}

struct Layer {
    query: Linear,
    key: Linear,
    value: Linear,
    attention_out: Linear,
    attention_norm: LayerNorm,
    intermediate: Linear,
    output: Linear,
    output_norm: LayerNorm,
}

pub struct Bert {
    config: BertConfig,
    word: Array2<f32>,
    position: Array2<f32>,
    token_type: Array2<f32>,
    embedding_norm: LayerNorm,
    layers: Vec<Layer>,
}

/// Reads tensors by name; checkpoints saved from `BertForX` prefix them with `bert.`.
struct Tensors<'a>(SafeTensors<'a>);

impl Tensors<'_> {
    fn raw(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>, LocalError> {
        let tensor = self
            .0
            .tensor(name)
            .or_else(|_| self.0.tensor(&format!("bert.{name}")))
            .map_err(|_| LocalError::Model(format!("model.safetensors has no tensor {name}")))?;
        if tensor.dtype() != Dtype::F32 {
            return Err(LocalError::Model(format!(
                "model.safetensors: {name} is {:?}; only F32 weights are supported",
                tensor.dtype()
            )));
        }
        if tensor.shape() != shape {
            return Err(LocalError::Model(format!(
                "model.safetensors: {name} has shape {:?}, config.json implies {shape:?}",
                tensor.shape()
            )));
        }
        Ok(tensor
            .data()
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect())
    }

    fn matrix(&self, name: &str, rows: usize, cols: usize) -> Result<Array2<f32>, LocalError> {
        let data = self.raw(name, &[rows, cols])?;
        Array2::from_shape_vec((rows, cols), data).map_err(|e| LocalError::Model(format!("{name}: {e}")))
    }

    fn vector(&self, name: &str, len: usize) -> Result<Array1<f32>, LocalError> {
        Ok(Array1::from(self.raw(name, &[len])?))
    }

    fn linear(&self, prefix: &str, out: usize, input: usize) -> Result<Linear, LocalError> {
        Ok(Linear {
            weight: self.matrix(&format!("{prefix}.weight"), out, input)?,
            bias: self.vector(&format!("{prefix}.bias"), out)?,
        })
    }

    fn norm(&self, prefix: &str, width: usize, eps: f32) -> Result<LayerNorm, LocalError> {
        Ok(LayerNorm {
            weight: self.vector(&format!("{prefix}.weight"), width)?,
            bias: self.vector(&format!("{prefix}.bias"), width)?,
            eps,
        })
    }
}

impl Bert {
    /// Builds the encoder from a checkpoint's bytes and its config.
    pub fn load(config: BertConfig, safetensors: &[u8]) -> Result<Self, LocalError> {
        config.check()?;
        let tensors = Tensors(
            SafeTensors::deserialize(safetensors)
                .map_err(|e| LocalError::Model(format!("model.safetensors: {e}")))?,
        );
        let hidden = config.hidden_size;
        let inner = config.intermediate_size;
        let eps = config.layer_norm_eps as f32;
        let word_rows = tensors
            .0
            .tensor("embeddings.word_embeddings.weight")
            .or_else(|_| tensors.0.tensor("bert.embeddings.word_embeddings.weight"))
            .map(|t| t.shape().first().copied().unwrap_or(0))
            .map_err(|_| LocalError::Model("model.safetensors has no word embeddings".into()))?;
        let type_rows = tensors
            .0
            .tensor("embeddings.token_type_embeddings.weight")
            .or_else(|_| tensors.0.tensor("bert.embeddings.token_type_embeddings.weight"))
            .map(|t| t.shape().first().copied().unwrap_or(0))
            .map_err(|_| LocalError::Model("model.safetensors has no token type embeddings".into()))?;
        let layers = (0..config.num_hidden_layers)
            .map(|i| {
                let p = format!("encoder.layer.{i}");
                Ok(Layer {
                    query: tensors.linear(&format!("{p}.attention.self.query"), hidden, hidden)?,
                    key: tensors.linear(&format!("{p}.attention.self.key"), hidden, hidden)?,
                    value: tensors.linear(&format!("{p}.attention.self.value"), hidden, hidden)?,
                    attention_out: tensors.linear(&format!("{p}.attention.output.dense"), hidden, hidden)?,
                    attention_norm: tensors.norm(&format!("{p}.attention.output.LayerNorm"), hidden, eps)?,
                    intermediate: tensors.linear(&format!("{p}.intermediate.dense"), inner, hidden)?,
                    output: tensors.linear(&format!("{p}.output.dense"), hidden, inner)?,
                    output_norm: tensors.norm(&format!("{p}.output.LayerNorm"), hidden, eps)?,
                })
            })
            .collect::<Result<Vec<_>, LocalError>>()?;
        Ok(Self {
            word: tensors.matrix("embeddings.word_embeddings.weight", word_rows, hidden)?,
            position: tensors.matrix(
                "embeddings.position_embeddings.weight",
                config.max_position_embeddings,
                hidden,
            )?,
            token_type: tensors.matrix("embeddings.token_type_embeddings.weight", type_rows, hidden)?,
            embedding_norm: tensors.norm("embeddings.LayerNorm", hidden, eps)?,
            layers,
            config,
        })
    }

    pub fn dimensions(&self) -> usize {
        self.config.hidden_size
    }

    pub fn max_positions(&self) -> usize {
        self.config.max_position_embeddings
    }

    /// The unit-length sentence vector of one tokenized text.
    pub fn embed(&self, ids: &[u32], type_ids: &[u32], pooling: Pooling) -> Result<Vec<f32>, LocalError> {
        let tokens = ids.len();
        if tokens == 0 || tokens > self.max_positions() {
            return Err(LocalError::Model(format!(
                "{tokens} tokens; the model reads 1 to {}",
                self.max_positions()
            )));
        }
        let mut x = Array2::<f32>::zeros((tokens, self.dimensions()));
        for (position, (mut row, (&id, &kind))) in
            x.rows_mut().into_iter().zip(ids.iter().zip(type_ids)).enumerate()
        {
            let (id, kind) = (id as usize, kind as usize);
            if id >= self.word.nrows() || kind >= self.token_type.nrows() {
                return Err(LocalError::Model(format!(
                    "token id {id} (type {kind}) is outside the model's vocabulary"
                )));
            }
            row.assign(&self.word.row(id));
            row += &self.position.row(position);
            row += &self.token_type.row(kind);
        }
        self.embedding_norm.apply(&mut x);
        for layer in &self.layers {
            x = self.layer(layer, x);
        }
        let pooled = match pooling {
            Pooling::Mean => x
                .mean_axis(Axis(0))
                .unwrap_or_else(|| Array1::zeros(self.dimensions())),
            Pooling::Cls => x.row(0).to_owned(),
        };
        let norm = pooled.dot(&pooled).sqrt().max(1e-12);
        Ok(pooled.iter().map(|v| v / norm).collect())
    }

    fn layer(&self, layer: &Layer, x: Array2<f32>) -> Array2<f32> {
        let heads = self.config.num_attention_heads;
        let width = self.dimensions() / heads;
        let scale = 1.0 / (width as f32).sqrt();
        let (q, k, v) = (
            layer.query.forward(&x.view()),
            layer.key.forward(&x.view()),
            layer.value.forward(&x.view()),
        );
        let mut context = Array2::<f32>::zeros(x.raw_dim());
        for head in 0..heads {
            // `s![]` expands to an `allow(unsafe_code)` the workspace forbids.
            let cols = Slice::from(head * width..(head + 1) * width);
            let mut scores = q.slice_axis(Axis(1), cols).dot(&k.slice_axis(Axis(1), cols).t());
            for mut row in scores.rows_mut() {
                let max = row.fold(f32::NEG_INFINITY, |m, &v| m.max(v));
                row.mapv_inplace(|v| ((v - max) * scale).exp());
                let sum = row.sum();
                row /= sum;
            }
            context
                .slice_axis_mut(Axis(1), cols)
                .assign(&scores.dot(&v.slice_axis(Axis(1), cols)));
        }
        let mut attended = layer.attention_out.forward(&context.view());
        attended += &x;
        layer.attention_norm.apply(&mut attended);
        let mut inner = layer.intermediate.forward(&attended.view());
        inner.mapv_inplace(gelu);
        let mut out = layer.output.forward(&inner.view());
        out += &attended;
        layer.output_norm.apply(&mut out);
        out
    }
}

/// BERT's exact GELU (with erf), not the tanh approximation.
fn gelu(x: f32) -> f32 {
    0.5 * x * (1.0 + libm::erff(x * std::f32::consts::FRAC_1_SQRT_2))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gelu_is_the_erf_form() {
        assert!((gelu(1.0) - 0.841_344_7).abs() < 1e-6);
        assert!((gelu(-1.0) + 0.158_655_3).abs() < 1e-6);
        assert_eq!(gelu(0.0), 0.0);
    }

    #[test]
    fn layer_norm_centres_and_scales_each_row() {
        let norm = LayerNorm {
            weight: Array1::from(vec![1.0, 1.0, 1.0, 1.0]),
            bias: Array1::from(vec![0.5, 0.5, 0.5, 0.5]),
            eps: 1e-12,
        };
        let mut x = Array2::from_shape_vec((1, 4), vec![1.0, 2.0, 3.0, 4.0]).unwrap();
        norm.apply(&mut x);
        let row = x.row(0);
        assert!((row.sum() / 4.0 - 0.5).abs() < 1e-6, "{row}");
        assert!((row[0] - (0.5 - 1.5 / 1.25f32.sqrt())).abs() < 1e-5, "{row}");
    }

    #[test]
    fn unsupported_architectures_are_named() {
        let config: BertConfig = serde_json::from_value(serde_json::json!({
            "hidden_size": 8, "num_attention_heads": 2, "num_hidden_layers": 1,
            "intermediate_size": 16, "max_position_embeddings": 4, "hidden_act": "gelu_new"
        }))
        .unwrap();
        let err = config.check().unwrap_err().to_string();
        assert!(err.contains("gelu_new"), "{err}");
    }
}
