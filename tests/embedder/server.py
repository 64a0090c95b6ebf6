"""An Ollama-compatible embedding server that runs the real all-MiniLM-L6-v2
(`minilm.py`), for tests and benches that need real embeddings offline.

    python server.py [--port 0] [--host 127.0.0.1]

Prints one line, `listening on http://HOST:PORT`, once it accepts connections. Speaks:
`POST /api/embed` (`{"model", "input": str | [str], "truncate"}` → `{"model",
"embeddings", "prompt_eval_count"}`), `POST /api/show` (the model's metadata:
`bert.embedding_length`, `bert.context_length` = 256 word pieces), `GET /api/tags`,
`GET /` ("Ollama is running"), and OpenAI's `POST /v1/embeddings`. Any model name is
served by the one model, as a single-model Ollama would be.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from minilm import MiniLM

MODEL_NAME = "all-minilm:l6-v2"


class Handler(BaseHTTPRequestHandler):
    model: MiniLM
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
            vectors = self.model.embed(texts)
            tokens = sum(self.model.count_tokens(t) for t in texts)
        model = body.get("model") or MODEL_NAME
        if self.path == "/api/embed":
            self._send(200, {"model": model, "embeddings": vectors, "prompt_eval_count": tokens})
        else:
            self._send(200, {"object": "list", "model": model,
                             "data": [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)],
                             "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--model-dir", default=None, help="all-MiniLM-L6-v2 files (default: the PyPI package's)")
    args = parser.parse_args()
    Handler.model = MiniLM(args.model_dir)
    server = ThreadingHTTPServer((args.host, args.port), Handler)
    host, port = server.server_address[:2]
    print(f"listening on http://{host}:{port}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
