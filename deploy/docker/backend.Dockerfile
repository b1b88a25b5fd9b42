# syntax=docker/dockerfile:1
# The backend image: /usr/local/bin/lancemaster run as `backend`, Node.js 20
# and the builder at /opt/lancemaster/builders/lancedb with the exact
# packages of its lock file (`npm ci`). Build from the repository root with
# `make image` (docs/operations.md, "Containers"). The backend's config
# names the worker: [node, /opt/lancemaster/builders/lancedb/builder.js].
ARG GO_VERSION=1.26.8
ARG NODE_VERSION=20

FROM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG REVISION=unknown
ARG BUILD_DATE=
RUN CGO_ENABLED=0 make build BIN=/out/lancemaster VERSION="${VERSION}" REVISION="${REVISION}" BUILD_DATE="${BUILD_DATE}"

# The builder's packages (@lancedb/lancedb ships native code for glibc
# linux: hence a Debian base, not Alpine).
FROM node:${NODE_VERSION}-bookworm-slim AS builder
WORKDIR /opt/lancemaster/builders/lancedb
COPY builders/lancedb/package.json builders/lancedb/package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund
COPY builders/lancedb/*.js ./

FROM node:${NODE_VERSION}-bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 lancemaster \
 && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/lancemaster --shell /usr/sbin/nologin lancemaster \
 && install -d -o 10001 -g 10001 -m 0700 /var/lib/lancemaster
COPY --from=builder /opt/lancemaster/builders/lancedb /opt/lancemaster/builders/lancedb
COPY --from=build /out/lancemaster /usr/local/bin/lancemaster
USER 10001:10001
# thrift (dispatches from the leader), http (/metrics, /livez, /readyz)
EXPOSE 9050 9101
VOLUME ["/var/lib/lancemaster"]
ENTRYPOINT ["/usr/local/bin/lancemaster"]
CMD ["backend", "--config=/etc/lancemaster/backend.yaml"]
