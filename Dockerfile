# syntax=docker/dockerfile:1
# Onyx: the control UI built with Node, the gateway built in release with
# cached dependencies (cargo-chef), run on slim Debian as a non-root user,
# with the subscription providers' CLIs (Claude Code, Codex, GitHub Copilot)
# installed globally so their provider types need no `command`. The data
# dir, the workspace and /backups are volumes in docker-compose.yml.

FROM node:22-bookworm-slim AS ui
WORKDIR /src/frontend
COPY frontend/package.json frontend/package-lock.json ./
RUN npm install --no-audit --no-fund
COPY frontend/ ./
RUN npm run build

FROM rust:1.95-bookworm AS chef
RUN cargo install cargo-chef --locked --version 0.1.73
WORKDIR /src

FROM chef AS planner
COPY . .
RUN cargo chef prepare --recipe-path recipe.json

FROM chef AS builder
COPY --from=planner /src/recipe.json recipe.json
# Dependencies only: this layer is reused until Cargo.lock changes.
RUN cargo chef cook --release --package onyx --recipe-path recipe.json
COPY . .
COPY --from=ui /src/frontend/build frontend/build
RUN cargo build --release --locked --package onyx --bin onyx

FROM debian:bookworm-slim
# Node 22 for the CLIs, taken from the official image (bookworm's nodejs is 18).
COPY --from=ui /usr/local/bin/node /usr/local/bin/node
COPY --from=ui /usr/local/lib/node_modules/npm /usr/local/lib/node_modules/npm
# The versions tests/cli/package.json pins and tests against.
ARG CLAUDE_CODE_VERSION=2.1.197
ARG CODEX_VERSION=0.169.0
ARG COPILOT_VERSION=1.0.102
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates curl \
 && rm -rf /var/lib/apt/lists/* \
 && ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm \
 && npm install -g --no-audit --no-fund \
      "@anthropic-ai/claude-code@${CLAUDE_CODE_VERSION}" \
      "@openai/codex@${CODEX_VERSION}" \
      "@github/copilot@${COPILOT_VERSION}" \
 && npm cache clean --force \
 && claude --version && codex --version && copilot --version \
 && useradd --system --uid 10001 --user-group --create-home --home-dir /home/onyx onyx \
 && mkdir -p /home/onyx/data /home/onyx/workspace /backups \
 && chown -R onyx:onyx /home/onyx /backups
COPY --from=builder /src/target/release/onyx /usr/local/bin/onyx
COPY config/ /etc/onyx/
USER onyx
WORKDIR /home/onyx
# Everything Onyx writes goes under ONYX_DATA_DIR (a volume in compose);
# HOME holds nothing of Onyx's, so the root filesystem can be read-only.
ENV HOME=/home/onyx \
    ONYX_CONFIG=/etc/onyx/onyx.compose.json5 \
    ONYX_DATA_DIR=/home/onyx/data \
    ONYX_LOG_FORMAT=json
EXPOSE 18790
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
  CMD curl -fsS http://127.0.0.1:18790/health || exit 1
ENTRYPOINT ["onyx"]
CMD ["serve", "--listen", "0.0.0.0:18790"]
