"""The NumPy all-MiniLM-L6-v2 reproduces the model's published reference output
(sentence-transformers' README example), and the server speaks Ollama's /api/embed."""

import json
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np

from minilm import MiniLM

HERE = Path(__file__).parent

# SentenceTransformer("all-MiniLM-L6-v2").encode([...]) — the first 8 of 384 dimensions.
REFERENCE = {
    "This is an example sentence": [0.0676569, 0.0634960, 0.0487131, 0.0793050, 0.0374481, 0.0026528, 0.0393750, -0.0070985],
    "Each sentence is converted": [0.0864386, 0.1027626, 0.0053946, 0.0020444, -0.0099634, 0.0253855, 0.0492876, -0.0306266],
}


def test_matches_the_published_reference_values():
    vectors = MiniLM().embed(list(REFERENCE))
    for vector, expected in zip(vectors, REFERENCE.values()):
        assert len(vector) == 384
        assert abs(np.linalg.norm(vector) - 1.0) < 1e-5
        assert np.allclose(vector[:8], expected, atol=2e-6), vector[:8]


def test_similar_sentences_are_closer_than_unrelated_ones():
    cat, feline, tax = MiniLM().embed(["The cat sat on the mat.", "A feline rested on a rug.", "Quarterly tax filing deadline"])
    assert np.dot(cat, feline) > np.dot(cat, tax) + 0.2


def test_server_speaks_ollama_embed():
    server = subprocess.Popen([sys.executable, str(HERE / "server.py")], stdout=subprocess.PIPE, text=True)
    try:
        url = server.stdout.readline().strip().removeprefix("listening on ")
        request = urllib.request.Request(f"{url}/api/embed", method="POST",
                                         data=json.dumps({"model": "all-minilm", "input": list(REFERENCE)}).encode(),
                                         headers={"content-type": "application/json"})
        reply = json.load(urllib.request.urlopen(request, timeout=60))
        assert len(reply["embeddings"]) == 2
        assert np.allclose(reply["embeddings"][0][:8], REFERENCE["This is an example sentence"], atol=2e-6)
        show = urllib.request.Request(f"{url}/api/show", method="POST", data=b'{"model": "all-minilm"}')
        assert json.load(urllib.request.urlopen(show, timeout=10))["model_info"]["bert.context_length"] == 256
    finally:
        server.kill()


def test_server_speaks_the_rerank_api():
    server = subprocess.Popen([sys.executable, str(HERE / "server.py")], stdout=subprocess.PIPE, text=True)
    try:
        url = server.stdout.readline().strip().removeprefix("listening on ")
        documents = ["Quarterly tax filing deadline", "A feline rested on a rug.", "The stock market fell"]
        body = {"model": "m", "query": "The cat sat on the mat.", "documents": documents, "top_n": 2}
        request = urllib.request.Request(f"{url}/v1/rerank", method="POST", data=json.dumps(body).encode(),
                                         headers={"content-type": "application/json"})
        results = json.load(urllib.request.urlopen(request, timeout=60))["results"]
        assert [r["index"] for r in results][:1] == [1], results
        assert len(results) == 2 and results[0]["relevance_score"] > results[1]["relevance_score"]
        vectors = MiniLM().embed([body["query"], documents[1]])
        assert abs(results[0]["relevance_score"] - float(np.dot(vectors[0], vectors[1]))) < 1e-5
        bad = urllib.request.Request(f"{url}/rerank", method="POST", data=b'{"query": 1, "documents": []}')
        try:
            urllib.request.urlopen(bad, timeout=10)
            raise AssertionError("a bad body was accepted")
        except urllib.error.HTTPError as err:
            assert err.code == 400
    finally:
        server.kill()


def test_cls_pooling_follows_the_pooling_config(tmp_path):
    from minilm import default_model_dir
    source = default_model_dir()
    for name in ("config.json", "tokenizer.json", "model.safetensors", "sentence_bert_config.json"):
        (tmp_path / name).symlink_to(source / name)
    (tmp_path / "1_Pooling").mkdir()
    (tmp_path / "1_Pooling" / "config.json").write_text('{"pooling_mode_cls_token": true, "pooling_mode_mean_tokens": false}')
    cls = MiniLM(tmp_path)
    mean = MiniLM(source)
    text = "This is an example sentence"
    assert cls.cls_pooling and not mean.cls_pooling
    a, b = cls.embed([text])[0], mean.embed([text])[0]
    assert abs(np.linalg.norm(a) - 1.0) < 1e-5
    assert np.dot(a, b) < 0.99
