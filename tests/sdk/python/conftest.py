"""Starts the fake upstreams and the real `onyx` binary for the SDK suite.

Binaries come from $ONYX_BIN and $FAKE_UPSTREAM_BIN (set by tests/run)."""

import json
import os
import subprocess
import tempfile
import time

import httpx
import pytest

ONYX_KEY = "onyx_sk_python_sdk_test_key"

# The fake upstreams' URLs once `stack` has started them (for tests that read
# what an upstream received at its `/_fake/requests`).
FAKE_URLS = {}


@pytest.fixture(scope="session")
def stack():
    fake = subprocess.Popen([os.environ["FAKE_UPSTREAM_BIN"]], stdout=subprocess.PIPE, text=True)
    urls = json.loads(fake.stdout.readline())
    FAKE_URLS.update(urls)
    tmp = tempfile.mkdtemp()
    config = os.path.join(tmp, "onyx.json5")
    with open(config, "w") as f:
        f.write(
            f"""{{
  gateway: {{ auth: {{ apiKeys: ["{ONYX_KEY}"] }} }},
  providers: {{
    openai: {{ type: "openai", baseUrl: "{urls['openai']}", apiKey: "{urls['key']}", maxRetries: 0 }},
    openai_resp: {{ type: "openai", baseUrl: "{urls['openai']}", apiKey: "{urls['key']}", maxRetries: 0, responses: true }},
    anthropic: {{ type: "anthropic", baseUrl: "{urls['anthropic']}", apiKey: "{urls['key']}" }},
    ollama: {{ type: "ollama", baseUrl: "{urls['ollama']}" }},
    azure: {{ type: "azure", baseUrl: "{urls['azure']}", apiKey: "{urls['key']}", maxRetries: 0, deployments: {{ "gpt-4o-mini": "fake-echo" }} }},
    gemini: {{ type: "gemini", baseUrl: "{urls['gemini']}", apiKey: "{urls['key']}", maxRetries: 0 }},
    vertex: {{ type: "vertex", baseUrl: "{urls['gemini']}", project: "demo", apiKey: "{urls['key']}", maxRetries: 0 }},
    bedrock: {{ type: "bedrock", baseUrl: "{urls['bedrock']}", region: "us-east-1", maxRetries: 0, models: ["fake-echo"] }},
  }},
}}"""
        )
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k not in ("OLLAMA_HOST", "ONYX_CONFIG")}
    env = {k: v for k, v in env.items() if not k.startswith("AWS_")}
    # Bedrock signs with the AWS chain's first link: these credentials, for the fake.
    env.update(
        HOME=tmp,
        ONYX_DATA_DIR=os.path.join(tmp, "data"),
        AWS_ACCESS_KEY_ID=urls["awsAccessKeyId"],
        AWS_SECRET_ACCESS_KEY=urls["awsSecretAccessKey"],
        AWS_EC2_METADATA_DISABLED="true",
    )
    onyx = subprocess.Popen(
        [os.environ["ONYX_BIN"], "serve", "--config", config, "--listen", "127.0.0.1:0"],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    line = onyx.stdout.readline()
    assert line.startswith("listening on "), line
    base = line.removeprefix("listening on ").strip()
    for _ in range(200):
        try:
            if httpx.get(f"{base}/health").status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.05)
    yield base
    onyx.terminate()
    fake.terminate()
    onyx.wait(10)
    fake.wait(10)
