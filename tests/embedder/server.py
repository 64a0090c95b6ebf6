"""An Ollama-compatible embedding server that runs the real all-MiniLM-L6-v2
(`minilm.py`), for tests and benches that need real embeddings offline.

    python server.py [--port 0] [--host 127.0.0.1] [--cache FILE]

Prints one line, `listening on http://HOST:PORT`, once it accepts connections. Speaks:
`POST /api/embed` (`{"model", "input": str | [str], "truncate"}` → `{"model",
"embeddings", "prompt_eval_count"}`), `POST /api/show` (the model's metadata:
`bert.embedding_length`, `bert.context_length` = 256 word pieces), `GET /api/tags`,
`GET /` ("Ollama is running"), OpenAI's `POST /v1/embeddings`, and the reranking API of
Cohere, Jina, TEI and vLLM (`POST /v1/rerank` or `/rerank`: `{"model", "query", "documents":
[str], "top_n"}` → `{"model", "results": [{"index", "relevance_score"}]}`, best first), which
scores each document by its cosine similarity to the query under the same model (a
bi-encoder standing in for a cross-encoder: no cross-encoder ships offline). Any model name is
served by the one model, as a single-model Ollama would be. `--cache FILE` keeps every
vector in a SQLite file by text, so a benchmark run again skips the model for texts it has seen.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sqlite3
import struct
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from minilm import MiniLM

MODEL_NAME = "all-minilm:l6-v2"


class Cache:
    """Vectors by SHA-256 of their text, in SQLite (used under the handler's lock)."""

    def __init__(self, path: str):
        self.db = sqlite3.connect(path, check_same_thread=False)
        self.db.execute("CREATE TABLE IF NOT EXISTS v (k BLOB PRIMARY KEY, v BLOB)")

    def embed(self, model: MiniLM, texts: list[str]) -> list[list[float]]:
        keys = [hashlib.sha256(t.encode()).digest() for t in texts]
        out: list = []
        for key, text in zip(keys, texts):
            row = self.db.execute("SELECT v FROM v WHERE k = ?", (key,)).fetchone()
            if row:
                out.append(list(struct.unpack(f"{len(row[0]) // 4}f", row[0])))
            else:
                vector = model.embed([text])[0]
                self.db.execute("INSERT OR REPLACE INTO v VALUES (?, ?)", (key, struct.pack(f"{len(vector)}f", *vector)))
                out.append(vector)
        self.db.commit()
        return out


class Handler(BaseHTTPRequestHandler):
    model: MiniLM
    cache: Cache | None = None
    lock = threading.Lock()  # NumPy already uses both cores for one batch.

    def log_message(self, format, *args):  # noqa: A002 - quiet by default
        pass

    def _send(self, status: int, body) -> None:
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "text/plain" if isinstance(body, str) else "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _json(self):
        length = int(self.headers.get("content-length") or 0)
        try:
            return json.loads(self.rfile.read(length) or b"{}")
        except json.JSONDecodeError as err:
            self._send(400, {"error": f"invalid JSON: {err}"})
            return None

    def do_GET(self):  # noqa: N802 - http.server's naming
        if self.path == "/":
            self._send(200, "Ollama is running")
        elif self.path == "/api/tags":
            self._send(200, {"models": [{"name": MODEL_NAME, "model": MODEL_NAME,
                                         "details": {"family": "bert", "parameter_size": "23M"}}]})
        else:
            self._send(404, {"error": "not found"})

    def do_POST(self):  # noqa: N802
        body = self._json()
        if body is None:
            return
        if self.path == "/api/show":
            self._send(200, {"model_info": {"general.architecture": "bert",
                                            "bert.embedding_length": self.model.dimensions,
                                            "bert.context_length": self.model.max_tokens}})
            return
        if self.path in ("/v1/rerank", "/rerank"):
            self._rerank(body)
            return
        if self.path not in ("/api/embed", "/v1/embeddings"):
            self._send(404, {"error": "not found"})
            return
        texts = body.get("input")
        if isinstance(texts, str):
            texts = [texts]
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            self._send(400, {"error": "input must be a string or a list of strings"})
            return
        with self.lock:
            vectors = self.cache.embed(self.model, texts) if self.cache else self.model.embed(texts)
            tokens = sum(self.model.count_tokens(t) for t in texts)
        model = body.get("model") or MODEL_NAME
        if self.path == "/api/embed":
            self._send(200, {"model": model, "embeddings": vectors, "prompt_eval_count": tokens})
        else:
            self._send(200, {"object": "list", "model": model,
                             "data": [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)],
                             "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})


    def _rerank(self, body) -> None:
        query, documents = body.get("query"), body.get("documents")
        if not isinstance(query, str) or not isinstance(documents, list) \
                or not all(isinstance(d, str) for d in documents):
            self._send(400, {"error": "query must be a string and documents a list of strings"})
            return
        top_n = body.get("top_n") or len(documents)
        with self.lock:
            texts = [query] + documents
            vectors = self.cache.embed(self.model, texts) if self.cache else self.model.embed(texts)
        q = vectors[0]
        scores = [sum(a * b for a, b in zip(q, v)) for v in vectors[1:]]
        order = sorted(range(len(documents)), key=lambda i: -scores[i])[:top_n]
        self._send(200, {"model": body.get("model") or MODEL_NAME,
                         "results": [{"index": i, "relevance_score": scores[i]} for i in order]})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--model-dir", default=None, help="all-MiniLM-L6-v2 files (default: the PyPI package's)")
    parser.add_argument("--cache", default=None, help="a SQLite file keeping vectors between runs")
    args = parser.parse_args()
    Handler.model = MiniLM(args.model_dir)
    Handler.cache = Cache(args.cache) if args.cache else None
    server = ThreadingHTTPServer((args.host, args.port), Handler)
    host, port = server.server_address[:2]
    print(f"listening on http://{host}:{port}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
